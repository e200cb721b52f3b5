/**
 * §4.1 wallet sign-in with smart-wallet signatures: ERC-1271 (deployed contract wallet) and
 * ERC-6492 (signature of a not-yet-deployed wallet, wrapped with its factory call), verified
 * through SIWE_RPC_URL against a local anvil chain.
 *
 * The "wallet" is a tiny contract written in raw EVM bytecode: isValidSignature(hash, sig) returns
 * the ERC-1271 magic value 0x1626ba7e iff the first 32 bytes of `sig` equal `hash`. That is no
 * real security, but it is enough to prove the server asks the chain with the right EIP-191 hash of
 * the SIWE message, and that a signature for another message is refused.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { getAddress, getContractAddress, hashMessage, pad, serializeErc6492Signature, type Hex } from 'viem';
import { createSiweMessage } from 'viem/siwe';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.ts';

// the platform package's binary when present (no wrapper process in between, so the kill in
// afterAll reaches anvil itself); otherwise the registry wrapper, which forwards signals
const FOUNDRY = join(process.cwd(), 'node_modules', '@foundry-rs');
const ANVIL =
  (existsSync(FOUNDRY) ? readdirSync(FOUNDRY) : [])
    .filter((d) => d.startsWith('anvil-'))
    .map((d) => join(FOUNDRY, d, 'bin', 'anvil'))
    .find((p) => existsSync(p)) ?? join(process.cwd(), 'node_modules', '.bin', 'anvil');
const anvilAvailable = existsSync(ANVIL);

// runtime: if calldata[4:36] (hash) == calldata[0x64:0x84] (first word of sig) return magic, else 0
//   PUSH1 4 CALLDATALOAD PUSH1 0x64 CALLDATALOAD EQ PUSH1 0x0f JUMPI
//   PUSH1 0x20 PUSH1 0 RETURN
//   JUMPDEST PUSH4 0x1626ba7e PUSH1 0xe0 SHL PUSH1 0 MSTORE PUSH1 0x20 PUSH1 0 RETURN
const WALLET_RUNTIME = ('0x' + '600435' + '606435' + '14' + '600f57' + '60206000f3' + '5b' + '631626ba7e' + '60e01b' + '600052' + '60206000f3') as Hex;
// init code returning the runtime: PUSH1 len DUP1 PUSH1 0x0b PUSH1 0 CODECOPY PUSH1 0 RETURN
const runtimeLen = (WALLET_RUNTIME.length - 2) / 2;
const WALLET_INIT = ('0x60' + runtimeLen.toString(16).padStart(2, '0') + '80600b6000396000f3' + WALLET_RUNTIME.slice(2)) as Hex;
// factory runtime: CREATE2(value 0, calldata as init code, salt 0), then stop
//   CALLDATASIZE PUSH1 0 PUSH1 0 CALLDATACOPY PUSH1 0 CALLDATASIZE PUSH1 0 PUSH1 0 CREATE2 POP STOP
const FACTORY_RUNTIME = '0x' + '36600060003760003660006000f55000';
const FACTORY = '0x00000000000000000000000000000000000fac70' as const;

let anvil: ChildProcess | undefined;
let rpcUrl = '';
let t: TestPlatform;

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

async function rpc(method: string, params: unknown[]) {
  const res = await fetch(rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  const body = (await res.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
}

beforeAll(async () => {
  if (!anvilAvailable) return;
  const port = await freePort();
  rpcUrl = `http://127.0.0.1:${port}`;
  anvil = spawn(ANVIL, ['--port', String(port), '--host', '127.0.0.1', '--silent'], { stdio: 'ignore' });
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await rpc('eth_chainId', []);
      break;
    } catch (err) {
      if (Date.now() > deadline || anvil.exitCode !== null) throw new Error(`anvil did not start: ${(err as Error).message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  await rpc('anvil_setCode', [FACTORY, FACTORY_RUNTIME]);
  t = await startTestPlatform({ SIWE_RPC_URL: rpcUrl });
});

afterAll(async () => {
  await t?.close();
  if (anvil && anvil.exitCode === null && anvil.signalCode === null) {
    const exited = new Promise((r) => anvil!.once('exit', r));
    anvil.kill('SIGTERM');
    const timer = setTimeout(() => anvil!.kill('SIGKILL'), 3000);
    await exited;
    clearTimeout(timer);
  }
});

const nonce = async () => (await t.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce as string;
const messageFor = async (address: `0x${string}`) =>
  createSiweMessage({ address, chainId: 8453, domain: 'localhost:3000', uri: 'http://localhost:3000', version: '1', nonce: await nonce(), issuedAt: new Date() });
const walletAuth = (payload: object) => t.web.inject({ method: 'POST', url: '/api/wallet-auth', payload });

describe.skipIf(!anvilAvailable)('§4.1 wallet-auth with smart-wallet signatures through SIWE_RPC_URL (anvil)', () => {
  it('ERC-1271: a deployed contract wallet that approves the message hash signs in; the user is created', async () => {
    const wallet = '0x0000000000000000000000000000000000c0ffee' as const;
    await rpc('anvil_setCode', [wallet, WALLET_RUNTIME]);
    const message = await messageFor(wallet);
    // 96 bytes, so it can never be taken for a plain 65-byte ECDSA signature
    const signature = pad(hashMessage(message), { size: 96, dir: 'right' });
    const res = await walletAuth({ address: wallet, message, signature });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ ok: true, user: { id: expect.any(String), name: `Wallet 0x0000...${getAddress(wallet).slice(-4)}` } });
    const rows = await t.database.db.kysely.selectFrom('users').select('email').where('wallet_address', '=', wallet).execute();
    expect(rows).toEqual([{ email: `${wallet}@wallet.local` }]);
  });

  it('ERC-1271: the contract refuses a signature made for another message → 401', async () => {
    const wallet = '0x0000000000000000000000000000000000c0ffe2' as const;
    await rpc('anvil_setCode', [wallet, WALLET_RUNTIME]);
    const message = await messageFor(wallet);
    const other = await messageFor(wallet);
    const res = await walletAuth({ address: wallet, message, signature: pad(hashMessage(other), { size: 96, dir: 'right' }) });
    expect(res.statusCode).toBe(401);
  });

  it('ERC-6492: an undeployed wallet (factory + calldata wrapped around the signature) signs in', async () => {
    const wallet = getContractAddress({ opcode: 'CREATE2', from: FACTORY, salt: pad('0x00', { size: 32 }), bytecode: WALLET_INIT });
    expect(await rpc('eth_getCode', [wallet, 'latest'])).toBe('0x');
    const message = await messageFor(wallet);
    const signature = serializeErc6492Signature({
      address: FACTORY,
      data: WALLET_INIT,
      signature: pad(hashMessage(message), { size: 96, dir: 'right' }),
    });
    const res = await walletAuth({ address: wallet, message, signature });
    expect(res.statusCode).toBe(200);
    expect(res.json().user.name).toBe(`Wallet ${wallet.slice(0, 6)}...${wallet.slice(-4)}`);
    // verification was a simulated call: nothing was deployed
    expect(await rpc('eth_getCode', [wallet, 'latest'])).toBe('0x');
  });

  it('ERC-6492: a wrapped signature for another message → 401', async () => {
    const wallet = getContractAddress({ opcode: 'CREATE2', from: FACTORY, salt: pad('0x00', { size: 32 }), bytecode: WALLET_INIT });
    const message = await messageFor(wallet);
    const signature = serializeErc6492Signature({
      address: FACTORY,
      data: WALLET_INIT,
      signature: pad(hashMessage('something else'), { size: 96, dir: 'right' }),
    });
    expect((await walletAuth({ address: wallet, message, signature })).statusCode).toBe(401);
  });

  it('an address with no code and a non-ECDSA signature → 401', async () => {
    const wallet = '0x0000000000000000000000000000000000badbad' as const;
    const message = await messageFor(wallet);
    expect((await walletAuth({ address: wallet, message, signature: pad(hashMessage(message), { size: 96, dir: 'right' }) })).statusCode).toBe(401);
  });
});

describe('§4.1 wallet-auth when SIWE_RPC_URL is unreachable', () => {
  it('a smart-wallet signature answers 401 quickly, never 5xx', async () => {
    const t2 = await startTestPlatform({ SIWE_RPC_URL: 'http://127.0.0.1:9' });
    try {
      const wallet = '0x0000000000000000000000000000000000c0ffee' as const;
      const n0 = (await t2.web.inject({ method: 'GET', url: '/api/auth/nonce' })).json().nonce;
      const message = createSiweMessage({ address: wallet, chainId: 8453, domain: 'localhost:3000', uri: 'http://localhost:3000', version: '1', nonce: n0 });
      const started = Date.now();
      const res = await t2.web.inject({ method: 'POST', url: '/api/wallet-auth', payload: { address: wallet, message, signature: pad(hashMessage(message), { size: 96, dir: 'right' }) } });
      expect(res.statusCode).toBe(401);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      await t2.close();
    }
  });
});
