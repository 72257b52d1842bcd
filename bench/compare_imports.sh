#!/bin/sh
# Are two imports of the same file stored the same? Import it with the old code and with the new,
# each with `bench/bench_import.py --no-build --keep --db <name>` (fresh databases: the same ids),
# then: bench/compare_imports.sh <db_a> <db_b>
# Prints per database one checksum of the traces (every column but imported_at, raw_text by md5),
# of the steps (every column, content by md5 and length, in (trace, index) order), of the steps'
# row order in the table, and of the MAST-Data judge labels; then counts and sums of the sizes and
# statistics columns. Equal lines: equal results.
S=${PGSERVER:-postgres://root@127.0.0.1:5432}
q() { psql "$S/$1" -XAtq -c "$2"; }
TR="SELECT id, project_id, mas_name, llm_name, benchmark, task, external_id, title, format, md5(raw_text), size_bytes, content_hash, metadata::text, outcome, n_steps, n_agents, n_agent_switches, n_chars, n_lines, n_repeated_steps, agents::text FROM traces_trace ORDER BY id"
ST="SELECT trace_id, index, agent, kind, md5(content), length(content), line_start, line_end, details::text, parent_index, model, input_tokens, output_tokens, started_at, duration_ms FROM traces_step ORDER BY trace_id, index"
ORD="SELECT string_agg(id::text, ',' ORDER BY id) FROM (SELECT s.id - min(s.id) OVER () AS id FROM traces_step s ORDER BY s.trace_id, s.index) x"
LB="SELECT a.trace_id, a.state, a.source::text, m.code, l.decision, l.evidence::text, l.rationale, l.confidence FROM annotations_annotation a JOIN annotations_modelabel l ON l.annotation_id = a.id JOIN taxonomy_failuremode m ON m.id = l.mode_id ORDER BY 1, 4"
for db in "$1" "$2"; do
  echo "$db: traces $(q $db "$TR" | md5sum | cut -c1-16)  steps $(q $db "$ST" | md5sum | cut -c1-16)  step row order $(q $db "$ORD" | md5sum | cut -c1-16)  labels $(q $db "$LB" 2>&1 | md5sum | cut -c1-16)"
  q $db "SELECT count(*), sum(size_bytes), sum(n_steps), sum(n_repeated_steps), sum(n_agent_switches), sum(n_lines), sum(n_chars) FROM traces_trace"
done
