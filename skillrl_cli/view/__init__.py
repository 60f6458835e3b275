"""``skillrl view``: a local, offline web app over episodes, the skill bank and training runs."""
