#!/usr/bin/python3
"""What the tests see of pxn's Prometheus metrics, read the way the
ecosystem reads them: fetched with an HTTP client (urllib) and parsed with
prometheus_client's own parser (Debian's python3-prometheus-client,
prometheus_client.parser.text_string_to_metric_families). Nothing here
parses the format itself.

  prom_scrape.py parse [FILE]          one line per sample, sorted (FILE,
                                       else standard input):
                                       name{label="value",...} value
  prom_scrape.py get URL               the same for one scrape of URL
  prom_scrape.py watch URL SAMPLE SECONDS INTERVAL
                                       scrapes every INTERVAL s for SECONDS s
                                       (or until SAMPLE shows a value that
                                       then stays the same for 1 s): one
                                       line per scrape, "<elapsed s> <value>"
                                       (value "-" when SAMPLE is absent)
  prom_scrape.py load URL RATE SECONDS scrapes at RATE a second for SECONDS
                                       seconds, each answer parsed; prints
                                       "scrapes N failures F seconds S rate R"

SAMPLE is a line of `parse`'s format without its value. Exit status 0, or
1 when a scrape failed or did not parse (the reason on stderr), 2 on bad
usage.
"""
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def samples(text):
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
            out.append(("%s{%s}" % (s.name, labels), s.value))
    return sorted(out)


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as answer:
        if answer.status != 200:
            raise RuntimeError("HTTP status %d" % answer.status)
        return answer.read().decode("utf-8")


def main(argv):
    if len(argv) in (2, 3) and argv[1] == "parse":
        text = open(argv[2]).read() if len(argv) == 3 else sys.stdin.read()
        for key, value in samples(text):
            print(key, repr(value))
        return 0
    if len(argv) == 3 and argv[1] == "get":
        for key, value in samples(fetch(argv[2])):
            print(key, repr(value))
        return 0
    if len(argv) == 6 and argv[1] == "watch":
        url, wanted, seconds, interval = argv[2], argv[3], float(argv[4]), float(argv[5])
        start = time.monotonic()
        last, since = None, start
        while time.monotonic() - start < seconds:
            value = dict(samples(fetch(url))).get(wanted)
            now = time.monotonic()
            print("%.3f %s" % (now - start, "-" if value is None else repr(value)),
                  flush=True)
            if value != last:
                last, since = value, now
            elif value is not None and now - since >= 1.0:
                break
            time.sleep(interval)
        return 0
    if len(argv) == 5 and argv[1] == "load":
        url, rate, seconds = argv[2], float(argv[3]), float(argv[4])
        start = time.monotonic()
        count = failures = 0
        while True:
            now = time.monotonic()
            if now - start >= seconds:
                break
            try:
                if not samples(fetch(url)):
                    raise RuntimeError("no sample")
            except Exception as error:  # every failure counts, none stops the load
                failures += 1
                print("scrape %d failed: %s" % (count, error), file=sys.stderr)
            count += 1
            ahead = start + count / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        elapsed = time.monotonic() - start
        print("scrapes %d failures %d seconds %.3f rate %.1f cpu %.2f" %
              (count, failures, elapsed, count / elapsed, time.process_time()))
        return 1 if failures else 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except Exception as error:
        print("prom_scrape.py: %s" % error, file=sys.stderr)
        sys.exit(1)
