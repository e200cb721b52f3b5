/**
 * The configuration file of an OpenClaw agent (AGENT_RUNTIME=openclaw): the agent's configuration
 * (§2 defaults < the user's configuration < §8 fixed settings, as for the built-in runtime) in the
 * shape OpenClaw's own strict schema accepts (`openclaw config schema`, checked against OpenClaw
 * 2026.9.6 with `openclaw config validate`). The local driver writes it outside the agent's
 * workspace and state, points OPENCLAW_CONFIG_PATH at it, mounts it read-only in the sandbox and
 * sets OPENCLAW_CONFIG_READONLY=1: §8 settings are "fixed at provisioning, not overridable", also
 * not by the agent itself.
 *
 * Where OpenClaw's schema differs from the §2/§8 vocabulary (docs/agents.md "OpenClaw"):
 *   - exec allowed/denied paths: OpenClaw has no such keys (its schema rejects
 *     `tools.exec.allowedPaths`). The shell allow-list is `tools.exec.security: allowlist` with
 *     `ask: off` (no human to ask), file tools are held to the workspace (`tools.fs.workspaceOnly`),
 *     and the paths themselves are enforced by the sandbox's filesystem view (only the workspace,
 *     home and a private /tmp are writable; /etc/passwd, /etc/shadow and /sys do not exist in it,
 *     /proc shows the agent's own processes only).
 *   - `channels.webchat`: not an OpenClaw channel id; OpenClaw's web chat is its Control UI
 *     (`gateway.controlUi.enabled`, §8), so the key is dropped.
 *   - the model: the platform's model router (AGENT_MODEL_BASE_URL, an OpenAI-compatible API)
 *     becomes the only provider, `platform`, and the agent's model `platform/default`
 *     (the gateway answers `default` with the agent's stored model, docs/agents.md "Model").
 *
 * No secret is written: the gateway token and the model key are SecretRefs to the process's
 * environment (OPENCLAW_GATEWAY_TOKEN, AGENT_MODEL_API_KEY), never on the command line.
 */
import { LIMITS } from '../../../config/limits.ts';
import { buildAgentConfig, configValue } from '../../../lib/agent-config.ts';

type Json = Record<string, unknown>;

/** The provider id the platform's model router gets in OpenClaw's configuration. */
export const OPENCLAW_PROVIDER = 'platform';

const envRef = (id: string) => ({ source: 'env', provider: 'default', id });

/** Environment of an OpenClaw agent: it reaches nothing but its model provider and cannot rewrite its configuration. */
export const OPENCLAW_ENV: Record<string, string> = {
  OPENCLAW_CONFIG_READONLY: '1',
  OPENCLAW_OFFLINE: '1', // no download of its helper binaries (fd, ripgrep)
  OPENCLAW_NO_AUTO_UPDATE: '1',
  OPENCLAW_DISABLE_BONJOUR: '1',
  DO_NOT_TRACK: '1',
  NO_COLOR: '1', // plain lines in logs/process.log, which logs() shows as they are
  // One process, the one the platform started and tracks (OpenClaw's docs/gateway/embedding.md): no
  // hand-off of a restart or update to a detached child. With the launcher's other re-executions
  // off too (the local driver's node flag and the marker below), a stop's SIGTERM reaches the
  // gateway itself, whose shutdown (state closed) takes under a second; a launcher in between
  // forwarded it late, and a stop outlasted the web app's 10 s backend call
  OPENCLAW_NO_RESPAWN: '1',
  // OpenClaw's launcher re-executes itself to move Node's compile cache below
  // <NODE_COMPILE_CACHE>/openclaw/<version>/; this marker (its own, for the re-executed child)
  // says the process already runs with the cache the platform chose (the agent's home)
  OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED: '1',
};

export type OpenClawConfigOptions = {
  plan: string;
  workspace: string;
  port: number;
  /** `loopback` for the local driver (one port per agent on the host); §8 `lan` in a container */
  bind: 'loopback' | 'lan';
  /** AGENT_MODEL_BASE_URL: the OpenAI-compatible model router; unset: no provider is configured */
  modelBaseUrl?: string | undefined;
  /** whether AGENT_MODEL_API_KEY is set (the key itself stays in the environment) */
  modelApiKey?: boolean;
  /** AGENT_MODEL */
  model?: string | undefined;
};

/**
 * The top-level keys of OpenClaw's configuration (`openclaw config schema`, 2026.9.6). Its schema
 * rejects any other key and the gateway then refuses to start, so other keys of the stored agent
 * configuration (the platform's own `name`, `aiProvider`, `model`) are left out; `model` becomes
 * `agents.defaults.model` when nothing else names the model. Keys below the top level are passed as
 * they are: a user's setting OpenClaw rejects stops the agent with OpenClaw's reason in its log.
 */
const OPENCLAW_ROOT_KEYS = new Set(
  (
    '$schema meta env wizard diagnostics logging update telemetry browser ui secrets auth accessGroups acp models nodeHost agents ' +
    'worktreeRoot worktreeAcceleration tools security bindings broadcast attachments messages tts commands approvals session cron ' +
    'transcripts hooks channels discovery talk gateway cloudWorkers desktop memory mcp skills plugins surfaces proxy'
  ).split(' '),
);

export function buildOpenClawConfig(userConfig: Json, o: OpenClawConfigOptions): Json {
  const merged = buildAgentConfig(userConfig, {
    plan: o.plan,
    workspace: o.workspace,
    port: o.port,
    ...(o.model ? { model: o.model } : {}),
  });
  const config = Object.fromEntries(Object.entries(merged).filter(([k]) => OPENCLAW_ROOT_KEYS.has(k)));
  const topLevelModel = typeof merged.model === 'string' && merged.model ? merged.model : undefined;
  const channels = config.channels as Json | undefined;
  if (channels) {
    delete channels.webchat;
    if (Object.keys(channels).length === 0) delete config.channels;
  }

  const tools = config.tools as Json;
  const exec = { ...(tools.exec as Json) };
  delete exec.allowedPaths;
  delete exec.deniedPaths;
  tools.exec = { ...exec, security: 'allowlist', ask: 'off' };
  tools.fs = { ...(tools.fs as Json | undefined), workspaceOnly: true };

  const gateway = config.gateway as Json;
  gateway.bind = o.bind;
  (gateway.auth as Json).token = envRef('OPENCLAW_GATEWAY_TOKEN');

  const model = o.model ?? (configValue(config, 'agents.defaults.model') as string | undefined) ?? topLevelModel;
  const models: Json = { ...(config.models as Json | undefined), catalogRefresh: { enabled: false } };
  if (o.modelBaseUrl) {
    const ids = model ? [model] : [];
    models.mode = 'replace';
    models.providers = {
      [OPENCLAW_PROVIDER]: {
        baseUrl: o.modelBaseUrl,
        api: 'openai-completions',
        ...(o.modelApiKey ? { apiKey: envRef('AGENT_MODEL_API_KEY') } : {}),
        models: ids.map((id) => ({ id, name: id })),
      },
    };
    if (model) {
      const defaults = (config.agents as Json).defaults as Json;
      defaults.model = model.startsWith(`${OPENCLAW_PROVIDER}/`) ? model : `${OPENCLAW_PROVIDER}/${model}`;
    }
  }
  config.models = models;

  // nothing leaves the machine but model calls: no update checks, statistics or LAN advertising
  config.update = { checkOnStart: false, auto: { enabled: false } };
  config.telemetry = { enabled: false };
  config.discovery = { mdns: { mode: 'off' } };
  capSkills(config, o.plan);
  lockToolPolicy(config);
  applyToolLimits(config);
  return config;
}

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** §2 Plans, skill limit: the skills an agent on `plan` may have (a plan not in the table: solo's). */
function skillLimitFor(plan: string): number {
  return LIMITS.planSkillLimit[plan] ?? (LIMITS.planSkillLimit.solo as number);
}

/**
 * The skills a configuration gives its agent, in order: the names of OpenClaw's agent allow-lists,
 * `agents.defaults.skills` and then each `agents.entries.<id>.skills` (OpenClaw 2026.9.6, its docs
 * "tools/skills-config"), each name once. The allow-list is what OpenClaw holds exactly: a skill
 * outside it is neither shown to the model nor callable as a command (`openclaw skills check`:
 * "Excluded by agent allowlist").
 */
function namedSkills(config: Json): unknown[] {
  const agents = isObject(config.agents) ? config.agents : {};
  const lists = [configValue(agents, 'defaults.skills')];
  if (isObject(agents.entries)) for (const entry of Object.values(agents.entries)) if (isObject(entry)) lists.push(entry.skills);
  return [...new Set(lists.flatMap((l) => (Array.isArray(l) ? l : [])))];
}

/**
 * Why `config` gives its agent more skills than the agent's `plan` allows (§2 Plans, skill limit),
 * in a sentence, or undefined: such a configuration is refused when it is saved (400) rather than
 * stored and cut down unseen (docs/agents.md "Skills").
 */
export function skillLimitProblem(config: Json, plan: string): string | undefined {
  const cap = skillLimitFor(plan);
  const named = namedSkills(config).length;
  if (named <= cap) return undefined;
  return (
    `The configuration names ${named} skills (agents.defaults.skills and agents.entries.*.skills together), but the ${plan} ` +
    `plan allows at most ${cap} skills per agent (§2 Plans): name at most ${cap}, or move the agent to a larger plan`
  );
}

/**
 * Holds the written configuration to the plan's skill limit: the agent has the skills its
 * configuration names, at most the plan's number, and none when it names none (OpenClaw's own
 * default, every eligible skill, would pass any limit). So `agents.defaults.skills` is always
 * written; a stored configuration naming more (saved before the agent moved to a smaller plan)
 * keeps its first names in order; and the model is shown at most that many skills
 * (`skills.limits.maxSkillsInPrompt`, the user's value when lower).
 */
function capSkills(config: Json, plan: string): void {
  const cap = skillLimitFor(plan);
  const kept = new Set(namedSkills(config).slice(0, cap));
  // copies: below the top level the merged configuration shares the user's own objects
  const agents = structuredClone(config.agents) as Json;
  const defaults = agents.defaults as Json;
  defaults.skills = Array.isArray(defaults.skills) ? [...new Set(defaults.skills)].filter((n) => kept.has(n)) : [];
  if (isObject(agents.entries))
    for (const entry of Object.values(agents.entries))
      if (isObject(entry) && Array.isArray(entry.skills)) entry.skills = [...new Set(entry.skills)].filter((n) => kept.has(n));
  config.agents = agents;
  const skills: Json = isObject(config.skills) ? { ...config.skills } : {};
  const limits: Json = isObject(skills.limits) ? { ...skills.limits } : {};
  limits.maxSkillsInPrompt = atMost(limits.maxSkillsInPrompt, cap, 0);
  skills.limits = limits;
  config.skills = skills;
}

/** `v` when it is a whole number from `min` to `limit`, else `limit`. */
const atMost = (v: unknown, limit: number, min = 1): number =>
  typeof v === 'number' && Number.isInteger(v) && v >= min && v <= limit ? v : limit;

/**
 * §8 fixes the tool profile and the denied tools; OpenClaw has layers that widen them again
 * (docs/gateway/config-tools/tool-policy.md): `tools.allow` and `tools.alsoAllow` add tools to the
 * profile, `tools.byProvider` sets a profile per model provider, `tools.elevated` and `codeMode`
 * change how tools run, and an agent's own `tools` (agents.entries.<id>.tools; OpenClaw 2026.9.6
 * has no agents.defaults.tools nor agents.list) override the profile for that agent. A user's configuration could so give a solo
 * agent `exec` or a `full` profile (found 2026-11-28, docs/security.md). Those layers are the
 * platform's: from the user's `tools` only what narrows or tunes is kept (the platform's profile,
 * deny, exec and fs over it, `web` capped below, `loopDetection`), and from an agent's own `tools`
 * only `deny` and `loopDetection`.
 */
const TOOL_KEYS_KEPT = new Set(['profile', 'deny', 'exec', 'fs', 'web', 'loopDetection']);
const AGENT_TOOL_KEYS_KEPT = ['deny', 'loopDetection'];

function lockToolPolicy(config: Json): void {
  const tools = config.tools as Json;
  for (const k of Object.keys(tools)) if (!TOOL_KEYS_KEPT.has(k)) delete tools[k];
  const agents = config.agents as Json;
  const narrow = (agent: unknown) => {
    if (!isObject(agent) || !('tools' in agent)) return;
    const own = isObject(agent.tools) ? agent.tools : {};
    const kept = Object.fromEntries(AGENT_TOOL_KEYS_KEPT.filter((k) => k in own).map((k) => [k, own[k]]));
    if (Object.keys(kept).length > 0) agent.tools = kept;
    else delete agent.tools;
  };
  if (isObject(agents.entries))
    agents.entries = Object.fromEntries(Object.entries(agents.entries).map(([id, entry]) => [id, copyOf(entry, narrow)]));
}

/** A shallow copy of `v` changed by `fn` (the user's stored configuration is never changed in place). */
const copyOf = (v: unknown, fn: (o: unknown) => void) => {
  const c = isObject(v) ? { ...v } : v;
  fn(c);
  return c;
};

/**
 * §8 agent tool limits in OpenClaw's keys (docs/agents.md "OpenClaw", limits table): web_fetch
 * returns at most LIMITS.toolWebOutputMaxChars characters (`maxChars`, and `maxCharsCap`, which
 * also bounds a call's own `maxChars`); images are scaled to at most LIMITS.imageMaxDimensionPx on
 * their longer side (`agents.defaults.imageMaxDimensionPx`); tool-loop detection is on, also for
 * every agent entry (`loopDetection.enabled`: OpenClaw 2026.9.6 has no key for the §8 count or
 * window; its detector blocks a run at its own fixed 20 repeated calls). A user's value is kept
 * only when it is lower.
 */
function applyToolLimits(config: Json): void {
  const tools = config.tools as Json;
  const web: Json = isObject(tools.web) ? { ...tools.web } : {};
  const fetch: Json = isObject(web.fetch) ? { ...web.fetch } : {};
  fetch.maxCharsCap = LIMITS.toolWebOutputMaxChars;
  fetch.maxChars = atMost(fetch.maxChars, LIMITS.toolWebOutputMaxChars);
  web.fetch = fetch;
  tools.web = web;
  tools.loopDetection = { enabled: true };
  const agents = config.agents as Json;
  const defaults = agents.defaults as Json;
  defaults.imageMaxDimensionPx = atMost(defaults.imageMaxDimensionPx, LIMITS.imageMaxDimensionPx);
  // an agent's own tools (lockToolPolicy left only deny and loopDetection there): detection stays on
  const ownTools = [
    agents.defaults,
    ...(isObject(agents.entries) ? Object.values(agents.entries) : []),
    ...(Array.isArray(agents.list) ? agents.list : []),
  ];
  for (const agent of ownTools)
    if (isObject(agent) && isObject(agent.tools) && 'loopDetection' in agent.tools)
      agent.tools = { ...agent.tools, loopDetection: { enabled: true } };
}
