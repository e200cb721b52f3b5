/**
 * A local anvil chain for tests that need a real JSON-RPC node (SIWE smart wallets, MPP payments,
 * stablecoin balances). The platform package's binary is used when present (no wrapper process in
 * between, so stop() reaches anvil itself); otherwise the registry wrapper, which forwards signals.
 * Test files skip with `describe.skipIf(!anvilAvailable)`.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Hex } from 'viem';

const FOUNDRY = join(process.cwd(), 'node_modules', '@foundry-rs');
const ANVIL =
  (existsSync(FOUNDRY) ? readdirSync(FOUNDRY) : [])
    .filter((d) => d.startsWith('anvil-'))
    .map((d) => join(FOUNDRY, d, 'bin', 'anvil'))
    .find((p) => existsSync(p)) ?? join(process.cwd(), 'node_modules', '.bin', 'anvil');

export const anvilAvailable = existsSync(ANVIL);

/** anvil's first unlocked account */
export const ANVIL_ACCOUNT = '0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266' as const;

export type Anvil = {
  rpcUrl: string;
  rpc(method: string, params: unknown[]): Promise<unknown>;
  /** Sends from an unlocked account and waits until the transaction is mined (anvil mines asynchronously under load). */
  send(from: Hex, to: Hex, data: Hex): Promise<{ hash: Hex; status: string; logs: unknown[] }>;
  stop(): Promise<void>;
};

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

export async function startAnvil(): Promise<Anvil> {
  // the port is free when we look and taken by anvil a moment later; another test file's anvil
  // may take it in between, and then our anvil exits while the readiness check below would talk
  // to the other one. Each anvil gets its own chain id and is ready only when that id answers.
  for (let attempt = 1; ; attempt++) {
    try {
      return await launch();
    } catch (err) {
      if (attempt >= 5) throw err;
    }
  }
}

async function launch(): Promise<Anvil> {
  const port = await freePort();
  const rpcUrl = `http://127.0.0.1:${port}`;
  const chainId = 100_000 + Math.floor(Math.random() * 1_000_000_000);
  const child = spawn(ANVIL, ['--port', String(port), '--host', '127.0.0.1', '--chain-id', String(chainId), '--silent'], {
    stdio: 'ignore',
  });

  async function rpc(method: string, params: unknown[]) {
    const res = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    const body = (await res.json()) as { result?: unknown; error?: { message: string } };
    if (body.error) throw new Error(`${method}: ${body.error.message}`);
    return body.result;
  }

  async function stop() {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  }

  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      if (child.exitCode !== null) throw new Error(`anvil exited (${child.exitCode})`);
      const id = await rpc('eth_chainId', []);
      if (BigInt(id as string) !== BigInt(chainId)) throw new Error(`port ${port} answers another chain (${id})`);
      break;
    } catch (err) {
      if (Date.now() > deadline || child.exitCode !== null) {
        await stop();
        throw new Error(`anvil did not start: ${(err as Error).message}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async function send(from: Hex, to: Hex, data: Hex) {
    const hash = (await rpc('eth_sendTransaction', [{ from, to, data }])) as Hex;
    for (let i = 0; i < 200; i++) {
      const receipt = (await rpc('eth_getTransactionReceipt', [hash])) as { status: string; logs: unknown[] } | null;
      if (receipt) return { hash, ...receipt };
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`transaction ${hash} was not mined`);
  }

  return { rpcUrl, rpc, send, stop };
}
