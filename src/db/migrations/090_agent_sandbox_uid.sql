-- Each agent's own OS user on the local driver (docs/security.md "Agents", finding N16).
-- Was 200000 + 24 bits of sha256(agent id): two agents could share a uid (~50 % at 4,800 agents)
-- and the range overlapped /etc/subuid allocations. Now an identity column: unique by
-- construction, allocated once, never reused, and above the ranges subuid, systemd's dynamic
-- users and container runtimes hand out (they stay below 2^31 too: some tools treat larger uids as
-- negative). Existing agents are numbered when the column is added; the local driver hands their
-- files over to the new uid on the next launch.
ALTER TABLE agents
  ADD COLUMN sandbox_uid integer GENERATED ALWAYS AS IDENTITY (START WITH 1000000000 MINVALUE 1000000000 MAXVALUE 2000000000 NO CYCLE);
ALTER TABLE agents ADD CONSTRAINT agents_sandbox_uid_key UNIQUE (sandbox_uid);
