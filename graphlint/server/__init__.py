"""The language server (`graphlint server`): the protocol front end on its event loop, the
worker process that analyses off it, the code actions and the editor's settings."""
