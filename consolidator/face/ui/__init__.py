"""`consolidator ui`: a local web viewer over the same database the command line reads.

`pages.py` and `overview.py` read what each page shows through the store's verbs and the
functions the commands use (`context`, `explain`, `search`), `actions.py` makes the changes a
person may ask for (approve, reject, forget, rollback, clear), `guard.py` decides which request
may reach either, and `app.py` ties them to URLs and templates. `serve.py` runs it on loopback.
"""
