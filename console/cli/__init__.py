"""The `truva-console` subcommands, one module per command; no Textual here."""
