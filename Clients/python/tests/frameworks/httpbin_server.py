"""Serves the ``httpbin`` package's app on 127.0.0.1 (an ephemeral port, printed as
the first line of output) with a thread per request, for requests-cache's suite.
Runs until killed."""

import logging
import sys
import warnings

from werkzeug.serving import make_server


def main() -> None:
    warnings.simplefilter("ignore")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from httpbin import app

    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(f"http://127.0.0.1:{server.server_port}", flush=True)
    sys.stdout.close()
    server.serve_forever()


if __name__ == "__main__":
    main()
