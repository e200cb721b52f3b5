/**
 * Bounded reads of an agent's files (src/lib/confined-fs.ts, docs/agents.md "File explorer"): the size an
 * fstat gave is never what the read trusts. The agent can grow a file between the platform's
 * fstat and its read (an ftruncate to 400 MB costs it nothing: the file is sparse); the reader
 * asks for at most limit + 1 bytes and refuses when it gets them. Here the file is grown exactly
 * in that window: after it was opened and fstat'ed as small, before the read.
 */
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { NAME_MAX_BYTES, openConfinedFile, readBounded, readConfinedText, writeConfinedFile } from '../../src/lib/confined-fs.ts';

const root = mkdtempSync(join(tmpdir(), 'confined-read-'));
const c = { root, owner: process.getuid?.() };
afterAll(() => rmSync(root, { recursive: true, force: true }));

const MiB = 1024 * 1024;

describe('readBounded', () => {
  it('refuses a file that grew past the limit after the fstat said it was small (the window between them)', async () => {
    writeFileSync(join(root, 'grow.txt'), 'ten bytes!');
    const { fh, stat } = await openConfinedFile(c, ['grow.txt']);
    try {
      expect(stat.size).toBe(10);
      truncateSync(join(root, 'grow.txt'), 400 * MiB); // what the agent does between the two
      expect(await readBounded(fh, MiB, stat.size)).toBeUndefined();
    } finally {
      await fh.close();
    }
  });

  it('reads what is there when the file shrank or grew within the limit, never more than the limit + 1 bytes', async () => {
    writeFileSync(join(root, 'shrink.txt'), 'x'.repeat(100));
    const { fh, stat } = await openConfinedFile(c, ['shrink.txt']);
    try {
      truncateSync(join(root, 'shrink.txt'), 5);
      expect((await readBounded(fh, MiB, stat.size))?.toString()).toBe('xxxxx');
      // grown from 5 bytes to 300 KB: past the first buffer, still within the limit
      writeFileSync(join(root, 'shrink.txt'), 'y'.repeat(300 * 1024));
      expect((await readBounded(fh, MiB, 5))?.length).toBe(300 * 1024);
      let asked = 0;
      const counting = {
        read: (buf: Buffer, off: number, len: number, pos: number) => {
          asked += len;
          return fh.read(buf, off, len, pos);
        },
      };
      truncateSync(join(root, 'shrink.txt'), 400 * MiB);
      expect(await readBounded(counting as unknown as typeof fh, MiB, 5)).toBeUndefined();
      expect(asked).toBeLessThanOrEqual(MiB + 1);
    } finally {
      await fh.close();
    }
  });

  it('takes exactly the limit, refuses one byte more', async () => {
    writeFileSync(join(root, 'edge.bin'), Buffer.alloc(64 * 1024, 1));
    const { fh } = await openConfinedFile(c, ['edge.bin']);
    try {
      expect((await readBounded(fh, 64 * 1024))?.length).toBe(64 * 1024);
      expect(await readBounded(fh, 64 * 1024 - 1)).toBeUndefined();
    } finally {
      await fh.close();
    }
  });
});

describe('readConfinedText (stats.json, 64 KiB)', () => {
  it('a file over the limit is no text; one within it is read', async () => {
    writeFileSync(join(root, 'stats.json'), '{"a":1}');
    expect(await readConfinedText(c, ['stats.json'], 64 * 1024)).toBe('{"a":1}');
    truncateSync(join(root, 'stats.json'), 400 * MiB);
    expect(await readConfinedText(c, ['stats.json'], 64 * 1024)).toBeUndefined();
  });
});

describe('names the filesystem refuses', () => {
  it('a component over 255 bytes is a refusal of the name (never ENAMETOOLONG), and the message does not carry it whole', async () => {
    const long = 'a'.repeat(NAME_MAX_BYTES + 1);
    for (const attempt of [
      () => openConfinedFile(c, [long]),
      () => writeConfinedFile(c, [long], 'x'),
      () => writeConfinedFile(c, [long, 'f'], 'x'),
    ]) {
      const err = await attempt().catch((e: unknown) => e);
      expect(err).toMatchObject({ name: 'ConfinedPathError', kind: 'name' });
      expect((err as Error).message.length).toBeLessThan(200);
    }
    // 255 bytes of a two-byte letter is 510 bytes: counted in bytes, not in characters
    expect(await writeConfinedFile(c, ['é'.repeat(127)], 'x')).toBe(1);
    expect(await writeConfinedFile(c, ['é'.repeat(128)], 'x').catch((e: { kind?: string }) => e.kind)).toBe('name');
  });
});
