"""The init stage: a new kernel project from publisher's templates
(publisher/resources/scaffold/), or only the release workflow of an existing one."""
