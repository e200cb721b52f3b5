/**
 * Child-process entry: the platform's backend app alone in its process, as `npm start -- backend`
 * runs it, on a database the parent migrated. argv[2]: JSON of settings (the names of docs/configuration.md), argv[3]:
 * the database URL (not a setting, so secrets are generated into DATA_DIR as in the in-process benches); stdout: the port, then nothing.
 * CPU profile of a chosen window (start-up excluded): the line `profile` on stdin starts V8's
 * sampling profiler (answered `profiling`), `save <file>` writes what it took as a .cpuprofile and answers `saved`.
 * Ends on SIGTERM, closing the platform (queued usage rows are written).
 */
import type { AddressInfo } from 'node:net';
import { loadConfig } from '../../src/config/env.ts';
import { resolveSecrets } from '../../src/config/secrets.ts';
import { createDb } from '../../src/db/client.ts';
import { tuneV8ForServing } from '../../src/lib/v8-tuning.ts';
import { createPlatform } from '../../src/platform.ts';
import { answerProfileRequests } from './profile-on-stdin.ts';

tuneV8ForServing(); // as src/main.ts does
const env = JSON.parse(process.argv[2] ?? '{}') as Record<string, string>;
const config = loadConfig(env, { cwd: env.DATA_DIR ?? process.cwd(), readDotEnv: false });
const db = createDb(process.argv[3]!, { poolSize: config.DATABASE_POOL_SIZE });
const platform = createPlatform({ config, db, secrets: resolveSecrets(config) });
const app = await platform.buildBackendApp();
await app.listen({ host: '127.0.0.1', port: 0 });
process.stdout.write(`${(app.server.address() as AddressInfo).port}\n`);

process.once('SIGTERM', async () => {
  await app.close().catch(() => {});
  await platform.close().catch(() => {});
  await db.close().catch(() => {});
  process.exit(0);
});

await answerProfileRequests();
