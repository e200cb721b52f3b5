/**
 * The yardstick: a bare Fastify app (no plugins, no hooks, no logger, no schema) with one GET
 * route returning a fixed JSON body. Started in the caller's process on a free loopback port.
 */
import Fastify from 'fastify';

export type RunningServer = { url: string; close(): Promise<void> };

export async function startBareFastify(path: string, body: unknown, method: 'GET' | 'POST' = 'GET'): Promise<RunningServer> {
  const app = Fastify({ logger: false });
  app.route({ method, url: path, handler: async () => body });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const addr = app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('bare Fastify: no address');
  return { url: `http://127.0.0.1:${addr.port}${path}`, close: () => app.close() };
}
