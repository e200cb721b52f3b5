-- AI usage rows carry a request count (docs/agents.md "Usage and budgets", src/domains/ai/usage-store.service.ts).
-- The usage store sums the calls of one flush window (LIMITS.aiUsageFlushMs, 100 ms) that share
-- caller, agent, model, provider and UTC day into one row; a row stays one call whenever a window
-- holds one call of its kind, which is every call below a few requests per second. Every report reads
-- sums by UTC day, model and agent, so they stay exact; what is given up is per-call timestamps
-- inside a 100 ms burst (created_at is the first call's). Why: writing a row per call cost
-- PostgreSQL 11-35 µs of CPU per proxied call on the proxy's own cores (docs/benchmarks.md
-- "AI proxy", round 5), more than the proxy's own code. Existing rows are one call each.
ALTER TABLE ai_usage ADD COLUMN requests integer NOT NULL DEFAULT 1 CHECK (requests >= 1);
