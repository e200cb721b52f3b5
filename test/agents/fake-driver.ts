/**
 * An in-memory hosting driver (a fake of the external hosting platform, docs/architecture.md "Tests"): records
 * every call, lets a test make the platform unreachable or make deploys fail or take time.
 */
import {
  type AgentDeploySpec,
  AgentNotDeployedError,
  type AgentStats,
  type ContainerStatus,
  type Deployment,
  type HostingDriver,
  HostingUnavailableError,
  type LogLine,
} from '../../src/domains/agents/drivers/driver.contract.ts';

export type FakeDriver = HostingDriver & {
  units: Map<string, { spec: AgentDeploySpec; status: ContainerStatus; logs: LogLine[]; startedAt: number }>;
  calls: { op: string; agentId: string }[];
  deploys: AgentDeploySpec[];
  unreachable: boolean;
  /** deploys of these agent ids throw */
  failDeploys: Set<string>;
  deployDelayMs: number;
};

export function createFakeDriver(): FakeDriver {
  const d: FakeDriver = {
    kind: 'local',
    units: new Map(),
    calls: [],
    deploys: [],
    unreachable: false,
    failDeploys: new Set(),
    deployDelayMs: 0,
    async deploy(spec): Promise<Deployment> {
      d.calls.push({ op: 'deploy', agentId: spec.agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      if (d.deployDelayMs) await new Promise((r) => setTimeout(r, d.deployDelayMs));
      if (d.failDeploys.has(spec.agentId)) throw new Error('fake deploy failed');
      d.deploys.push(spec);
      d.units.set(spec.agentId, {
        spec,
        status: 'healthy',
        startedAt: Date.now(),
        logs: [
          { timestamp: new Date().toISOString(), level: 'info', message: `gateway listening for ${spec.agentId}`, source: 'gateway' },
          { timestamp: new Date().toISOString(), level: 'warn', message: 'no channels configured', source: 'runtime' },
        ],
      });
      return { externalId: `fake-${spec.agentId}`, url: `http://127.0.0.1:1/${spec.agentId}`, status: 'healthy' };
    },
    async status(agentId) {
      d.calls.push({ op: 'status', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      const u = d.units.get(agentId);
      return u ? { status: u.status, url: `http://127.0.0.1:1/${agentId}` } : { status: 'not_found' };
    },
    async restart(agentId) {
      d.calls.push({ op: 'restart', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      const u = d.units.get(agentId);
      if (!u) throw new AgentNotDeployedError(agentId);
      u.status = 'healthy';
      u.startedAt = Date.now();
    },
    async suspend(agentId) {
      d.calls.push({ op: 'suspend', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      const u = d.units.get(agentId);
      if (!u) throw new AgentNotDeployedError(agentId);
      u.status = 'suspended';
    },
    async stop(agentId) {
      d.calls.push({ op: 'stop', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      const u = d.units.get(agentId);
      if (!u) throw new AgentNotDeployedError(agentId);
      u.status = 'stopped';
    },
    async resume(agentId) {
      d.calls.push({ op: 'resume', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      const u = d.units.get(agentId);
      if (!u) throw new AgentNotDeployedError(agentId);
      u.status = 'healthy';
    },
    async delete(agentId) {
      d.calls.push({ op: 'delete', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      d.units.delete(agentId);
    },
    async logs(agentId, options): Promise<LogLine[]> {
      d.calls.push({ op: 'logs', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      const lines = d.units.get(agentId)?.logs ?? [];
      return lines.filter((l) => !options.level || l.level === options.level).slice(-options.limit);
    },
    async stats(agentId): Promise<AgentStats> {
      d.calls.push({ op: 'stats', agentId });
      if (d.unreachable) throw new HostingUnavailableError('fake hosting down');
      const u = d.units.get(agentId);
      return {
        cpu: 1.5,
        memory: 50_000_000,
        memoryPercent: 2.5,
        network: { rxBytes: 10, txBytes: 20 },
        uptime: u ? Math.floor((Date.now() - u.startedAt) / 1000) : 0,
        pids: u ? 1 : 0,
        status: u?.status ?? 'not_found',
        messagesProcessed: 7,
        messagesFailed: 1,
        averageResponseTimeMs: 120,
      };
    },
    async shutdown() {},
  };
  return d;
}
