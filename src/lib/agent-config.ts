/**
 * The agent configuration file (§2 configuration table) with the fixed container settings of §8
 * applied on top. The same shape is used by the built-in runtime (which writes it into its
 * workspace) and by the OpenClaw runtime (src/domains/agents/drivers/openclaw-config.rules.ts turns it
 * into OpenClaw's vocabulary), so a user's configuration means the same thing on either runtime.
 *
 * No secret goes into this file: the gateway token reaches the runtime through its environment
 * (AGENT_GATEWAY_TOKEN, OPENCLAW_GATEWAY_TOKEN), never through a file or a command line.
 */

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Deep merge: objects merge key by key, everything else (arrays included) is replaced by `over`. */
export function deepMerge(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [k, v] of Object.entries(over)) {
    if (k === '__proto__' || k === 'constructor' || k === 'prototype') continue;
    out[k] = isObject(v) && isObject(out[k]) ? deepMerge(out[k] as Json, v) : v;
  }
  return out;
}

/** §8: `messaging` for solo, `coding` otherwise. */
export const toolsProfileFor = (plan: string): 'messaging' | 'coding' => (plan === 'solo' ? 'messaging' : 'coding');

/** §2 defaults, below the user's configuration. */
export function defaultAgentConfig(options: { plan: string; workspace: string; model?: string }): Json {
  return {
    logging: { level: 'info' },
    agents: { defaults: { ...(options.model ? { model: options.model } : {}), workspace: options.workspace } },
    tools: { profile: toolsProfileFor(options.plan) },
    gateway: { bind: 'lan', auth: { mode: 'token' } },
    channels: { webchat: { enabled: true } },
    session: { dmScope: 'per-channel-peer', resetTriggers: ['/new', '/reset'] },
    skills: { install: { nodeManager: 'npm' } },
  };
}

/** §8 "Agent container settings (fixed at provisioning, not overridable)", above the user's configuration. */
export function fixedAgentSettings(options: { plan: string; workspace: string; port: number }): Json {
  return {
    gateway: {
      mode: 'local',
      bind: 'lan',
      port: options.port,
      auth: { mode: 'token', allowTailscale: true },
      trustedProxies: ['127.0.0.1'],
      http: { endpoints: { chatCompletions: { enabled: true } } },
      controlUi: { enabled: true, allowedOrigins: ['*'] },
    },
    tools: {
      profile: toolsProfileFor(options.plan),
      deny: ['browser', 'canvas'],
      exec: {
        security: 'allowlist',
        allowedPaths: [options.workspace, '/tmp', '/home/node'],
        deniedPaths: ['/etc/shadow', '/etc/passwd', '/proc', '/sys'],
      },
    },
  };
}

/**
 * The effective configuration: §2 defaults < the user's configuration < §8 fixed settings.
 * A token the user put into `gateway.auth.token` is dropped (tokens never live in the file).
 */
export function buildAgentConfig(userConfig: Json, options: { plan: string; workspace: string; port: number; model?: string }): Json {
  const merged = deepMerge(deepMerge(defaultAgentConfig(options), isObject(userConfig) ? userConfig : {}), fixedAgentSettings(options));
  const auth = (merged.gateway as Json).auth as Json;
  delete auth.token;
  delete auth.password;
  return merged;
}

/** Reads a dotted path (`agents.defaults.model`) from a configuration object. */
export function configValue(config: Json, path: string): unknown {
  let cur: unknown = config;
  for (const part of path.split('.')) {
    if (!isObject(cur)) return undefined;
    cur = cur[part];
  }
  return cur;
}
