"""The push stage: gate (what may be published), plan (what changes), publish
(one commit), card (README.md on main), verify (what landed, who loads what)."""
