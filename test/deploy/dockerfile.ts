/**
 * A small reader of Dockerfiles for the deployment tests: instructions with continuation lines
 * joined and comments dropped, grouped by stage. No Docker engine runs here, so the tests check
 * the files' shape and rebuild the images' file layout themselves (docs/production.md "Images").
 */
import { readFileSync } from 'node:fs';

export type Instruction = { op: string; args: string };
export type Stage = { from: string; name: string | undefined; instructions: Instruction[] };

export function readDockerfile(path: string): Stage[] {
  const lines = readFileSync(path, 'utf8').split('\n');
  const instructions: Instruction[] = [];
  let pending = '';
  for (const raw of lines) {
    const line = raw.trim();
    // a comment line inside a continued instruction is dropped too, as Docker does
    if (line.startsWith('#') || (line === '' && pending === '')) continue;
    pending += `${pending ? ' ' : ''}${line.replace(/\\$/, '').trim()}`;
    if (line.endsWith('\\')) continue;
    const m = /^(\S+)\s*(.*)$/.exec(pending);
    if (m) instructions.push({ op: m[1]!.toUpperCase(), args: m[2]! });
    pending = '';
  }
  const stages: Stage[] = [];
  for (const ins of instructions) {
    if (ins.op === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      stages.push({ from: m?.[1] ?? ins.args, name: m?.[2], instructions: [] });
    } else {
      stages.at(-1)?.instructions.push(ins);
    }
  }
  return stages;
}

/** The arguments of every instruction `op` of a stage. */
export const argsOf = (stage: Stage, op: string) => stage.instructions.filter((i) => i.op === op).map((i) => i.args);

/** The exec form (JSON array) of an instruction's arguments, after any leading `--flag=value` options. */
export function execForm(args: string): string[] {
  const json = args.slice(args.indexOf('['));
  return JSON.parse(json) as string[];
}

/** `COPY --from=<stage> <src> <dest>` lines of a stage: [src, dest] pairs. */
export function copiesFrom(stage: Stage, from: string): [string, string][] {
  return argsOf(stage, 'COPY')
    .map((a) => a.split(/\s+/))
    .filter((parts) => parts.includes(`--from=${from}`))
    .map((parts) => {
      const paths = parts.filter((p) => !p.startsWith('--'));
      return [paths[0]!, paths[1]!];
    });
}
