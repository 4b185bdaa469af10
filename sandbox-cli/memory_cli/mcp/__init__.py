"""``memory mcp``: memoryd as a Model Context Protocol server over stdio, standard library only.

``session`` holds the protocol (no I/O), ``tools`` the tools and their schemas, ``stdio`` the
loop that moves lines, ``client_config`` the setup snippets for MCP clients.
"""
