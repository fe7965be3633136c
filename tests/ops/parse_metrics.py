"""Parses a scrape of roost's GET /metrics with Prometheus' own Python client and prints it
as JSON: {family: {"type": ..., "samples": [[name, labels, value], ...]}}.

    python parse_metrics.py prometheus|openmetrics < scrape.txt

The OpenMetrics parser is strict (it requires the `# EOF`, rejects a counter sample without
`_total`, ...); the Prometheus text parser is the one Prometheus' exporters are tested with.
Exits non-zero, with the parser's message, when the scrape does not parse.
"""

import json
import math
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus


def main() -> None:
    parse = {"prometheus": parse_prometheus, "openmetrics": parse_openmetrics}[sys.argv[1]]
    families = {}
    for family in parse(sys.stdin.read()):
        if family.name in families:
            raise SystemExit(f"family {family.name} appears twice")
        families[family.name] = {
            "type": family.type,
            "samples": [
                [s.name, s.labels, None if math.isinf(s.value) or math.isnan(s.value) else s.value]
                for s in family.samples
            ],
        }
    json.dump(families, sys.stdout)


if __name__ == "__main__":
    main()
