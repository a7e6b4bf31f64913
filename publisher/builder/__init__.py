"""The build stage: turn planned variants into build/<variant>/ folders."""
