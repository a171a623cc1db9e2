"""What a change reaches, read from the project's sources alone: which file may import which
(:mod:`.importgraph`) and which code reads the names a change binds or keeps what a changed
function made (:mod:`.namereads`). ``run --select changed`` plans with both."""
