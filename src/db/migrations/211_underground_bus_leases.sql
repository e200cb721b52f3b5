-- Underground bus deliveries are claimed with a lease instead of a transaction held for the webhook
-- call (docs/underground.md "Delivery"): the claim commits `locked_by` (a token unique to that claim)
-- and `lease_until`, the webhook is called with no transaction open, and the outcome is written in
-- a second short transaction fenced by the token. A job whose worker stopped mid-call is claimed
-- again once its lease has passed, so a crash loses no delivery.
ALTER TABLE underground_bus_deliveries
  ADD COLUMN locked_by text,
  ADD COLUMN lease_until timestamptz,
  -- the webhook's host and port as written in `target` (a checked http(s) URL without credentials):
  -- deliveries in flight are capped per target host, so one slow host holds at most a few of them
  ADD COLUMN target_host text NOT NULL
    GENERATED ALWAYS AS (lower(coalesce(substring(target FROM '^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]+)'), target))) STORED,
  ADD CONSTRAINT underground_bus_deliveries_lease CHECK ((locked_by IS NULL) = (lease_until IS NULL));

-- the claim counts a host's deliveries in flight: only leased rows, few at any time
CREATE INDEX underground_bus_deliveries_leased ON underground_bus_deliveries (target_host, lease_until)
  WHERE lease_until IS NOT NULL;
