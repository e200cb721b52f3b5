/** What the numbers were measured on: printed with every bench result. */
import os from 'node:os';

export type Machine = {
  cpuModel: string;
  cores: number;
  memoryGiB: number;
  node: string;
  platform: string;
  /** 1-minute load average when the bench started: other work on the machine skews absolute numbers */
  loadAvg1m: number;
  date: string;
};

export function describeMachine(): Machine {
  const cpus = os.cpus();
  return {
    cpuModel: cpus[0]?.model.trim() ?? 'unknown',
    cores: os.availableParallelism(),
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    platform: `${os.type()} ${os.release()} ${os.arch()}`,
    loadAvg1m: Math.round(os.loadavg()[0]! * 100) / 100,
    date: new Date().toISOString(),
  };
}

export const machineLine = (m: Machine) =>
  `${m.cpuModel}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.platform}, Node ${m.node}; load average ${m.loadAvg1m} at start; ${m.date}`;
