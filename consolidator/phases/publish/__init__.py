"""Publishing: the memory folder written from the database's current version. `from_store`
says what is published, `projection` writes it under the folder's lock, and `files` is the
one safe way to touch a file there."""
