-- Security events from the identity provider (§4.1 "Security event receivers", §6 "Security
-- events"). One row per verified security event token, keyed by its `jti`: a repeated token hits
-- the primary key and is acknowledged without being acted on again (§6 deduplication). The row is
-- written before the receiver answers 202 and is the job itself: the worker
-- (src/workers/security-events.ts) takes pending rows with FOR UPDATE SKIP LOCKED, acts on them
-- and marks them done, so an event accepted just before a crash or a restart is still acted on.
--
-- System data: tokens arrive without a session and name users the receiver has to find across
-- every account, so only the owner connection reads or writes these rows. Row-level security
-- with no policy keeps the request role out (migrate.ts grants it every table; see 070).
CREATE TABLE risc_events (
  -- the token's `jti`; the legacy receiver's tokens may lack one: `sha256:<hash of the token>`
  jti text PRIMARY KEY,
  receiver text NOT NULL CHECK (receiver IN ('primary', 'legacy')),
  issuer text NOT NULL,
  -- the verified `events` claim (event type URI -> {subject, reason, ...}); the legacy
  -- receiver's token names its user in `sub`, kept in legacy_email
  events jsonb NOT NULL,
  legacy_email text,
  state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  -- what processing did, for the operator: [{event, userIds, action}]
  outcome jsonb,
  received_at timestamptz NOT NULL DEFAULT now(),
  processed_at timestamptz
);
CREATE INDEX risc_events_pending_idx ON risc_events (next_attempt_at) WHERE state = 'pending';
ALTER TABLE risc_events ENABLE ROW LEVEL SECURITY;
