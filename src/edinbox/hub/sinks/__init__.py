"""Where invoices go: the accounting sink interface, the SQL sink (a table in the journal's
transaction), the HTTP sink (an accounting API, in lease mode), and the checks of what an invoice row can hold.
"""

from edinbox.hub.sinks._accounting import Accounting, Created, SqlAccounting, keep_remote
from edinbox.hub.sinks._http import TOKEN_VARIABLE, HttpAccounting, check_token, read_token
from edinbox.hub.sinks._invoice_checks import invoice_problem

__all__ = [
    "TOKEN_VARIABLE",
    "Accounting",
    "Created",
    "HttpAccounting",
    "SqlAccounting",
    "check_token",
    "invoice_problem",
    "keep_remote",
    "read_token",
]
