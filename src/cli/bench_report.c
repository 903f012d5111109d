/* bench_report.c - the reports of voxconv bench (being written). */
