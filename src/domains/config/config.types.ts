/** A configuration object (§2): what `agent_configs.config` and `config_backups.config` hold. */
export type JsonObject = Record<string, unknown>;
