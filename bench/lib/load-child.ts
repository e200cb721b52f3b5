/**
 * Child-process entry for one autocannon measurement (see load.ts). The load generator runs in
 * its own process so it never shares an event loop with the server under test; it still shares
 * the machine's cores, which is why the benches report ratios measured in one run.
 *
 * argv[2]: JSON LoadOptions. stdout: one JSON line, the raw autocannon result of the measured
 * phase (the warm-up result is discarded).
 */
import autocannon, { type Request } from 'autocannon';
import type { LoadOptions } from './load.ts';

const opts = JSON.parse(process.argv[2] ?? '{}') as LoadOptions;

const once = (duration: number) =>
  autocannon({
    url: opts.url,
    method: (opts.method ?? 'GET') as NonNullable<Request['method']>,
    headers: opts.headers ?? {},
    ...(opts.body !== undefined ? { body: opts.body } : {}),
    ...(opts.cookies?.length
      ? {
          requests: [
            {
              setupRequest: (req: Request) => ({
                ...req,
                headers: { ...req.headers, cookie: opts.cookies![Math.floor(Math.random() * opts.cookies!.length)]! },
              }),
            },
          ],
        }
      : {}),
    connections: opts.connections,
    pipelining: opts.pipelining ?? 1,
    duration,
  });

if (opts.warmupS > 0) await once(opts.warmupS);
const result = await once(opts.durationS);
process.stdout.write(`${JSON.stringify(result)}\n`);
