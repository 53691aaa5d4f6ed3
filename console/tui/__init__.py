"""The Textual front end: the app, its screens and widgets. Only `console.entry` imports it."""
