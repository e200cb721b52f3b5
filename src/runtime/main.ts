/**
 * Entry of the built-in agent runtime: one agent, one process (the local driver starts it with
 * Node 24: this .ts file when the platform runs its sources, its compiled copy under `npm start`).
 * It is a separate program from the platform, so it reads its own environment here; it never sees
 * the platform's configuration. It loads as little as it can at start (no framework, no logger
 * library, no fetch; the WebSocket library and node:crypto come with the first request that
 * needs them): an idle agent holds what it loaded for good (docs/benchmarks.md).
 *
 * Environment (set by the hosting driver):
 *   AGENT_PORT               port of the gateway (falls back to PORT, then 18789 per §1 item 3)
 *   AGENT_HOST               address to bind (default 0.0.0.0, §8 `bind lan`; the local driver uses 127.0.0.1)
 *   AGENT_LISTEN_FD          a listening Unix socket the platform bound and handed over (the local driver's sandbox, whose
 *                            network has loopback only; the platform forwards AGENT_PORT to it): the gateway serves it
 *                            instead of binding AGENT_PORT itself
 *   AGENT_LOOPBACK_SOCKETS   a folder of `<port>.sock` Unix sockets: calls to a loopback URL (the platform's backend,
 *                            its AI gateway) go through the one for their port (the local driver's sandbox)
 *   AGENT_GATEWAY_TOKEN      required: the per-agent gateway token every non-probe request must present as a Bearer token
 *                            (OPENCLAW_GATEWAY_TOKEN is read when unset, so a container sets one name for both runtimes)
 *   AGENT_WORKSPACE          the agent's workspace directory (default: the working directory); the config file
 *                            (openclaw.json), logs/runtime.log (JSON lines) and logs/stats.json are written there
 *   AGENT_ID, AGENT_USER_ID  the agent and its owner
 *   AGENT_PLAN               solo | collective | label | network (default solo; picks the tools profile, §8)
 *   AGENT_BACKEND_URL        the platform backend the agent calls back to
 *   AGENT_PLATFORM_API_KEY   the agent's own scoped key for the platform (never the platform's INTERNAL_API_KEY)
 *   AGENT_MODEL_BASE_URL     OpenAI-compatible base URL answering chat: the platform sets its own AI gateway
 *                            (docs/agents.md "Model access"); unset: chat answers 503 MODEL_NOT_CONFIGURED and
 *                            /readyz lists `model` as failing
 *   AGENT_MODEL_API_KEY      Bearer key for that base URL: from the platform, the agent's own platform key (never a provider key)
 *   AGENT_MODEL              default model id (else the configuration's agents.defaults.model, else its top-level `model`)
 *   AGENT_MODEL_TIMEOUT_MS   per-request timeout to the model provider (default 60000)
 *   AGENT_CONFIG_JSON        the user's agent configuration (§2), JSON; §8 fixed settings are applied on top
 *   AGENT_LOG_LEVEL          debug | info | warn | error (default: the configuration's logging.level, else info)
 *   AGENT_AUTH_LOOPBACK_EXEMPT  true (default) | false: loopback clients skip the gateway auth rate limit (§8)
 *   AGENT_TRUSTED_PROXY      address of the one HTTP proxy the platform runs in front of the gateway; unset (default):
 *                            the client address is the connection's and X-Forwarded-For is ignored
 *   AGENT_WS_MAX_MESSAGE_BYTES, AGENT_WS_MESSAGES_PER_SECOND, AGENT_WS_BURST, AGENT_MAX_CONCURRENT_MODEL_CALLS,
 *   AGENT_MODEL_QUEUE, AGENT_HEADERS_TIMEOUT_MS, AGENT_REQUEST_TIMEOUT_MS, AGENT_KEEPALIVE_TIMEOUT_MS
 *                            flood and slow-client limits (defaults in gateway.ts DEFAULT_GATEWAY_LIMITS; docs/agents.md)
 *
 * The platform's DATABASE_URL, INTERNAL_API_KEY, WALLET_ENCRYPTION_KEY and SECRETS_ENCRYPTION_KEY
 * are never given to an agent; if they are present anyway they are removed from this process's
 * environment before anything else runs, so no tool the agent starts can inherit them.
 */
import { join, resolve } from 'node:path';
import { LIMITS } from '../config/limits.ts';
import { buildAgentConfig, configValue } from '../lib/agent-config.ts';
import { type ChatTurn, createGateway, DEFAULT_HEARTBEAT_PROMPT, type GatewayLimits } from './gateway.ts';
import { postJson, routeLoopbackThrough } from './model-client.ts';
import { systemPromptOf } from './persona.ts';
import { createFileLogger, isLogLevel } from './runtime-log.ts';

// Builtins that an `import` would cost memory for (their namespace loads more modules) are taken
// with getBuiltinModule; docs/benchmarks.md "Memory of one built-in-runtime agent" has the figures.
const { accessSync, chmodSync, constants, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } =
  process.getBuiltinModule('node:fs');

const PLATFORM_SECRETS = ['DATABASE_URL', 'INTERNAL_API_KEY', 'WALLET_ENCRYPTION_KEY', 'SECRETS_ENCRYPTION_KEY'];
const leaked = PLATFORM_SECRETS.filter((name) => process.env[name] !== undefined);
for (const name of leaked) delete process.env[name];

const env = process.env;
const str = (name: string): string | undefined => {
  const v = env[name]?.trim();
  return v ? v : undefined;
};

const token = str('AGENT_GATEWAY_TOKEN') ?? str('OPENCLAW_GATEWAY_TOKEN');
if (!token) {
  process.stderr.write('agent runtime: AGENT_GATEWAY_TOKEN is required\n');
  process.exit(1);
}
const port = Number(str('AGENT_PORT') ?? str('PORT') ?? LIMITS.agentGatewayPort);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`agent runtime: invalid port ${JSON.stringify(str('AGENT_PORT') ?? str('PORT'))}\n`);
  process.exit(1);
}
const host = str('AGENT_HOST') ?? '0.0.0.0';
const listenFd = str('AGENT_LISTEN_FD') === undefined ? undefined : Number(str('AGENT_LISTEN_FD'));
if (listenFd !== undefined && !(Number.isInteger(listenFd) && listenFd > 2)) {
  process.stderr.write(`agent runtime: invalid AGENT_LISTEN_FD ${JSON.stringify(str('AGENT_LISTEN_FD'))}\n`);
  process.exit(1);
}
routeLoopbackThrough(str('AGENT_LOOPBACK_SOCKETS'));
const workspace = resolve(str('AGENT_WORKSPACE') ?? process.cwd());
const agentId = str('AGENT_ID') ?? 'agent';
const plan = str('AGENT_PLAN') ?? 'solo';
let userConfig: Record<string, unknown> = {};
try {
  const raw = str('AGENT_CONFIG_JSON');
  if (raw) userConfig = JSON.parse(raw);
} catch (err) {
  process.stderr.write(`agent runtime: AGENT_CONFIG_JSON is not JSON (${(err as Error).message}); using defaults\n`);
}

const logsDir = join(workspace, 'logs');
mkdirSync(logsDir, { recursive: true });
const logFile = join(logsDir, 'runtime.log');
// keep one previous log file once it passes 10 MB, so a long-lived agent cannot fill the disk
try {
  if (statSync(logFile).size > 10 * 1024 * 1024) renameSync(logFile, `${logFile}.1`);
} catch {
  /* no log yet */
}

const config = buildAgentConfig(userConfig, { plan, workspace, port, model: str('AGENT_MODEL') });
const configFile = join(workspace, 'openclaw.json');
// the user's configuration may carry channel secrets (a bot token): readable by the agent only
writeFileSync(configFile, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
chmodSync(configFile, 0o600);

const level = str('AGENT_LOG_LEVEL') ?? (configValue(config, 'logging.level') as string | undefined) ?? 'info';
const logger = createFileLogger({ file: logFile, level: isLogLevel(level) ? level : 'info', base: { agentId } });
if (leaked.length) logger.warn({ source: 'runtime', removed: leaked }, 'platform secrets were present in the environment and were removed');

const model = {
  baseUrl: str('AGENT_MODEL_BASE_URL'),
  apiKey: str('AGENT_MODEL_API_KEY'),
  // the model named in the configuration: agents.defaults.model (§2), else a top-level `model` the platform stores
  defaultModel:
    str('AGENT_MODEL') ??
    [configValue(config, 'agents.defaults.model'), configValue(config, 'model')].find(
      (m): m is string => typeof m === 'string' && m.length > 0,
    ),
  timeoutMs: Number(str('AGENT_MODEL_TIMEOUT_MS') ?? 60_000) || 60_000,
};

/**
 * Chat turns go back to the platform with the agent's own scoped key (never the platform's
 * INTERNAL_API_KEY), so GET /api/agents/:id/messages shows the real conversation. Fire and
 * forget: a platform that is briefly unreachable must not slow or fail the chat.
 */
const backendUrl = str('AGENT_BACKEND_URL');
const platformKey = str('AGENT_PLATFORM_API_KEY');
const reportTurn =
  backendUrl && platformKey
    ? (turn: ChatTurn) => {
        const platform = turn.channel === 'websocket' ? 'webchat' : 'api';
        postJson(
          `${backendUrl.replace(/\/+$/, '')}/api/agent-callbacks/messages`,
          {
            messages: [
              { sender: 'user', content: turn.user.slice(0, 32_000), platform },
              { sender: 'agent', content: turn.reply.slice(0, 32_000), platform, responseMs: turn.responseMs },
            ],
          },
          { authorization: `Bearer ${platformKey}` },
          AbortSignal.timeout(5_000),
          // fire and forget: a burst of chats queues its reports on a few connections rather than
          // opening one each (the local driver's sandbox allows an agent 256 to the platform)
          { maxSockets: 8 },
        )
          .then((res) => {
            res.discard();
            if (!res.ok) logger.warn({ source: 'runtime', status: res.status }, 'platform did not store the chat turn');
          })
          .catch((err: Error) => logger.warn({ source: 'runtime', err: err.message }, 'platform unreachable: chat turn not stored'));
      }
    : undefined;

/** A positive integer limit from the environment, or undefined (the gateway default applies). */
const positiveInt = (name: string): number | undefined => {
  const v = Number(str(name));
  return Number.isInteger(v) && v > 0 ? v : undefined;
};
const limitEnv: Record<string, keyof GatewayLimits> = {
  AGENT_WS_MAX_MESSAGE_BYTES: 'wsMaxMessageBytes',
  AGENT_WS_MESSAGES_PER_SECOND: 'wsMessagesPerSecond',
  AGENT_WS_BURST: 'wsBurst',
  AGENT_MAX_CONCURRENT_MODEL_CALLS: 'maxConcurrentModelCalls',
  AGENT_MODEL_QUEUE: 'modelQueue',
  AGENT_HEADERS_TIMEOUT_MS: 'headersTimeoutMs',
  AGENT_REQUEST_TIMEOUT_MS: 'requestTimeoutMs',
  AGENT_KEEPALIVE_TIMEOUT_MS: 'keepAliveTimeoutMs',
};
const limits: Partial<GatewayLimits> = {};
for (const [name, key] of Object.entries(limitEnv)) {
  const v = positiveInt(name);
  if (v !== undefined) limits[key] = v;
}
const trustedProxy = str('AGENT_TRUSTED_PROXY');

const { app } = await createGateway({
  limits,
  ...(trustedProxy ? { trustedProxy } : {}),
  gatewayToken: token,
  agentId,
  model,
  logger,
  ...(reportTurn ? { reportTurn } : {}),
  statsFile: join(logsDir, 'stats.json'),
  // the persona (docs/agents.md "Persona"), read once: a changed prompt applies from the agent's next start
  systemPrompt: systemPromptOf(configValue(config, 'systemPrompt')),
  // §4.12 heartbeat: the configured prompt (agents.defaults.heartbeat.prompt, as OpenClaw names it) and HEARTBEAT.md
  heartbeat: {
    prompt: (() => {
      const p = configValue(config, 'agents.defaults.heartbeat.prompt');
      return typeof p === 'string' && p.trim() ? p : DEFAULT_HEARTBEAT_PROMPT;
    })(),
    context: () => {
      try {
        return readFileSync(join(workspace, 'HEARTBEAT.md'), 'utf8').slice(0, 20_000) || undefined;
      } catch {
        return undefined;
      }
    },
  },
  loopbackExempt: str('AGENT_AUTH_LOOPBACK_EXEMPT') !== 'false' && str('AGENT_AUTH_LOOPBACK_EXEMPT') !== '0',
  readinessChecks: {
    config: () => existsSync(configFile),
    workspace: () => {
      accessSync(workspace, constants.W_OK);
      return true;
    },
  },
});

let closing = false;
const stop = async (signal: string) => {
  if (closing) return;
  closing = true;
  logger.info({ source: 'runtime', signal }, 'agent runtime stopping');
  const force = setTimeout(() => process.exit(0), 5_000);
  force.unref();
  await app.close().catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));

try {
  await app.listen(listenFd !== undefined ? { fd: listenFd } : { port, host });
} catch (err) {
  logger.error({ source: 'runtime', err: (err as Error).message }, 'agent runtime could not listen');
  process.stderr.write(`agent runtime: cannot listen on ${host}:${port}: ${(err as Error).message}\n`);
  process.exit(1);
}
logger.info(
  { source: 'runtime', port, plan, model: model.baseUrl ? 'configured' : 'none', toolsProfile: configValue(config, 'tools.profile') },
  'agent runtime listening',
);
