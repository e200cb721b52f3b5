-- The operator account (§4.7, docs/agents.md "Calls without a user"): backend calls that carry only
-- the bearer key (INTERNAL_API_KEY) and no `x-user-id` act as this account, so POST /api/agents,
-- GET /api/agents and DELETE /api/agents/:id work as §4.7 shows them (K and nothing more) while every
-- agent still belongs to exactly one user row and row-level security keeps applying. The account
-- has no password and no linked identity, so nobody can sign in as it; its address is in the
-- reserved `.invalid` domain (RFC 2606), so no identity provider can vouch for it either.
INSERT INTO users (id, email, name, plan, referral_code)
VALUES ('00000000-0000-0000-0000-000000000001', 'operator@operator.invalid', 'Operator', 'network', 'OPERATOR')
ON CONFLICT DO NOTHING;
