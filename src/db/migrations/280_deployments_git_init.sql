-- Provisioning may ask for the agent's workspace to start as a git repository (docs/agents.md
-- "A repository from the start"): the deploy job that creates the workspace carries the request,
-- since the workspace exists only once the hosting driver has deployed the agent.
ALTER TABLE deployments ADD COLUMN git_init boolean NOT NULL DEFAULT false;
