/**
 * The stdin protocol by which a bench profiles a child process over a chosen window (start-up
 * excluded): the line `profile` starts V8's sampling profiler (answered `profiling`), `save <file>`
 * writes what it took as a .cpuprofile (answered `saved`). The platform's backend child and the
 * bare floor proxy both answer it, so both are profiled the same way.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createInterface } from 'node:readline';

export async function answerProfileRequests(): Promise<void> {
  let inspector: Session | undefined;
  for await (const line of createInterface({ input: process.stdin })) {
    if (line === 'profile') {
      inspector = new Session();
      inspector.connect();
      await inspector.post('Profiler.enable');
      await inspector.post('Profiler.start');
      process.stdout.write('profiling\n');
    } else if (line.startsWith('save ') && inspector) {
      const { profile } = await inspector.post('Profiler.stop');
      inspector.disconnect();
      writeFileSync(line.slice(5), JSON.stringify(profile));
      process.stdout.write('saved\n');
    }
  }
}
