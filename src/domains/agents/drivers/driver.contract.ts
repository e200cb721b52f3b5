// Changes since first defined (all additive): AgentStats gained optional runtime counters
// (messagesProcessed, messagesFailed, averageResponseTimeMs); AgentNotDeployedError added; deploy()
// documented as idempotent (re-adopts a live unit launched with the same spec) — call it on platform
// start for every agent marked running; watchExits() added (optional), and stop()/suspend() documented as
// ending the unit's processes (the owner's Stop calls stop()).
/**
 * One interface over every place an agent can run (docs/architecture.md rule 4): the local driver (a child
 * process per agent running src/runtime), the Render REST API, the Docker Engine API and the Kubernetes API.
 * Drivers are chosen by HOSTING_DRIVER from a Record<Kind, Factory> so an unwired kind fails to
 * compile. Drivers hold no platform state of their own beyond what they can rediscover (the
 * local driver re-adopts its processes; remote drivers ask the hosting API).
 */

/** §3 Container health status values. */
export type ContainerStatus = 'healthy' | 'starting' | 'running' | 'stopped' | 'suspended' | 'not_found' | 'error';

/** Everything a driver needs to start one agent. */
export type AgentDeploySpec = {
  agentId: string;
  userId: string;
  /** solo | collective | label | network (or the resource plan names of §4.7) */
  plan: string;
  /** 48-char per-agent gateway token (§8); the agent's gateway requires it as a Bearer token */
  gatewayToken: string;
  /** per-agent scoped key the agent uses to reach the platform (never INTERNAL_API_KEY) */
  platformApiKey: string;
  /** the platform's backend URL the agent calls back to */
  backendUrl: string;
  /** the user's agent configuration (§2 configuration table); fixed §8 settings are applied on top */
  config: Record<string, unknown>;
  /** extra environment for the runtime (model provider base URL/key for the agent itself) */
  env?: Record<string, string>;
  /**
   * The agent's own OS user on drivers that run it on this machine (the local driver, as root):
   * allocated once per agent by the database (migration 090, unique), never derived from the id.
   */
  sandboxUid?: number;
};

/** An agent's workspace on this machine, for the §4.17 file explorer (docs/agents.md "File explorer"). */
export type AgentWorkspace = {
  dir: string;
  /** uid every file the platform opens there must belong to (the agent's user); undefined: not checked */
  owner?: number | undefined;
  /**
   * Runs a short command as the agent, inside its sandbox, with only the workspace bound and the
   * agent's own network (the explorer's git). Undefined where the driver cannot confine it (no
   * bubblewrap): callers refuse rather than run it with the platform's rights.
   */
  run?: (file: string, args: string[], options: { env: Record<string, string>; timeoutMs: number; maxBuffer: number }) => Promise<string>;
  /**
   * The agent's disk use against its quota as last measured (the local driver, docs/agents.md
   * "Disk"); undefined before a first measure. Over it, the explorer accepts no write that grows the workspace.
   */
  diskUsage?: () => Promise<{ usedBytes: number | null; quotaBytes: number; over: boolean } | undefined>;
};

export type Deployment = {
  /** the driver's own id of the running unit (pid-based id, Render service id, …) */
  externalId: string;
  /** where the agent's gateway answers (http://127.0.0.1:<port> locally, https://<subdomain> remotely) */
  url: string;
  status: ContainerStatus;
};

export type AgentStats = {
  cpu: number; // percent
  memory: number; // bytes resident
  memoryPercent: number;
  network: { rxBytes: number; txBytes: number };
  uptime: number; // seconds
  pids: number;
  status: ContainerStatus;
  /** chat requests the runtime answered (built-in runtime; absent when the driver cannot know) */
  messagesProcessed?: number;
  /** chat requests that failed (upstream error, timeout) */
  messagesFailed?: number;
  /** mean time to answer a chat request, ms */
  averageResponseTimeMs?: number;
};

/** What stats() answers for a unit that is not running (or not there): zeros with its status. */
export const idleStats = (status: ContainerStatus): AgentStats => ({
  cpu: 0,
  memory: 0,
  memoryPercent: 0,
  network: { rxBytes: 0, txBytes: 0 },
  uptime: 0,
  pids: 0,
  status,
});

export type LogLine = { timestamp: string; level: 'debug' | 'info' | 'warn' | 'error'; message: string; source: string };

export interface HostingDriver {
  readonly kind: DriverKind;
  /**
   * Starts the agent; resolves once the unit exists (not necessarily healthy). Throws HostingUnavailableError when the platform cannot be reached.
   * Idempotent: when a live unit for the agent already runs from the same spec (token, configuration, platform key,
   * model settings) it is adopted, not restarted; otherwise any old unit is replaced (so a rotated platform key restarts it). Call it on platform start for agents marked running.
   */
  deploy(spec: AgentDeploySpec): Promise<Deployment>;
  /** Current state as the hosting platform sees it; `not_found` when it has no such unit. */
  status(agentId: string): Promise<{ status: ContainerStatus; url?: string }>;
  /**
   * Starts the unit again from the launch it was deployed with (the watchdog's repair; a new
   * configuration needs deploy()). Throws AgentNotDeployedError when there is nothing to
   * restart/resume (never deployed, or a local process gone after a platform restart: deploy again).
   */
  restart(agentId: string): Promise<void>;
  /**
   * Takes the unit out of service, keeping what resume() needs to bring it back. The local driver
   * ends its processes (nothing runs, its state stays on disk: docs/agents.md "Stop, suspend and
   * restart"); Render suspends the service; Docker stops the container and Kubernetes scales to 0, so
   * nothing runs and no memory is held (docs/agents.md "Idle agents sleep": the idle sweep calls it).
   */
  suspend(agentId: string): Promise<void>;
  /**
   * Optional: ends every process of the unit but keeps what restart() needs to start it again:
   * the owner's Stop, and the watchdog's §3 repair (kill the gateway, wait, restart it). Drivers
   * whose platform replaces the instance on restart (Render) leave it out; Stop then suspends and the
   * repair only restarts.
   */
  stop?(agentId: string): Promise<void>;
  resume(agentId: string): Promise<void>;
  /** Removes the unit; succeeds when it is already gone. */
  delete(agentId: string): Promise<void>;
  logs(agentId: string, options: { limit: number; level?: string }): Promise<LogLine[]>;
  stats(agentId: string): Promise<AgentStats>;
  /**
   * Optional: the agent's workspace on this machine, for the §4.17 file explorer (docs/agents.md
   * "File explorer"). Drivers whose agents live elsewhere (Render) leave it out.
   */
  workspace?(agentId: string): AgentWorkspace;
  /**
   * Optional: resolves once the driver can serve, rejecting with what is wrong in its settings (the
   * container drivers load their SDK and the cluster or engine settings here). The backend awaits it
   * before it starts its workers, so a wrong KUBECONFIG stops the start rather than every deploy.
   */
  ready?(): Promise<void>;
  /**
   * Optional (local driver): the Unix socket that serves the agent gateway at `origin`
   * (`http://127.0.0.1:<port>`) in this process, for the platform's own clients to connect to
   * directly; undefined for any other origin.
   */
  localGatewaySocket?(origin: string): string | undefined;
  /**
   * Optional (local driver): calls `listener` within seconds when a unit's process ends without the
   * platform stopping it (a crash, a kill, an exit of its own): at once for the processes it
   * started, by polling for those it adopted from a previous platform process. The platform has
   * the watchdog check the agent at once (docs/watchdog.md "Checks on demand"). Returns the unsubscribe.
   */
  watchExits?(listener: (agentId: string, exit: UnitExit) => void): () => void;
  /** Stops what this process owns on platform shutdown (local: child processes); remote drivers do nothing. */
  shutdown(): Promise<void>;
}

/** How a unit's process ended: its exit code, or the signal that ended it (null when not known, e.g. an adopted process). */
export type UnitExit = { code: number | null; signal: string | null };

export type DriverKind = 'local' | 'render' | 'docker' | 'kubernetes';

export class HostingUnavailableError extends Error {
  override name = 'HostingUnavailableError';
}

/** restart/resume/suspend of an agent the driver has no unit (or no launch spec) for: deploy it again. */
export class AgentNotDeployedError extends Error {
  override name = 'AgentNotDeployedError';
}
