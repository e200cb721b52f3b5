/**
 * OpenAI-compatible audio endpoints (`POST /audio/speech`, `POST /audio/transcriptions`) of the
 * configured provider (OPENAI_BASE_URL / OPENAI_API_KEY), used by the gateway's `tts` and `stt`
 * plugins (§4.8). The wire format is OpenAI's: JSON in and audio bytes out for speech,
 * multipart/form-data in and JSON `{text}` out for transcriptions.
 */
export type AudioClient = {
  readonly configured: boolean;
  speech(p: {
    input: string;
    voice: string;
    model: string;
    format: string;
    signal?: AbortSignal;
  }): Promise<{ audio: Buffer; contentType: string }>;
  transcribe(p: {
    audio: Buffer;
    filename: string;
    model: string;
    language?: string | undefined;
    signal?: AbortSignal;
  }): Promise<{ text: string }>;
};

export class AudioError extends Error {
  override name = 'AudioError';
}

export function createAudioClient(o: { baseUrl: string; apiKey: string | undefined; timeoutMs: number }): AudioClient {
  const base = o.baseUrl.replace(/\/+$/, '');
  const signalFor = (s?: AbortSignal) => (s ? AbortSignal.any([s, AbortSignal.timeout(o.timeoutMs)]) : AbortSignal.timeout(o.timeoutMs));
  const auth = { authorization: `Bearer ${o.apiKey ?? ''}` };
  const fail = async (res: Response) => {
    await res.body?.cancel().catch(() => {});
    return new AudioError(`audio provider answered ${res.status}`);
  };
  return {
    configured: o.apiKey !== undefined,
    async speech(p) {
      const res = await fetch(`${base}/audio/speech`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ model: p.model, input: p.input, voice: p.voice, response_format: p.format }),
        signal: signalFor(p.signal),
      }).catch((err) => {
        throw new AudioError(`audio provider unreachable: ${(err as Error).message}`);
      });
      if (!res.ok) throw await fail(res);
      return { audio: Buffer.from(await res.arrayBuffer()), contentType: res.headers.get('content-type') ?? 'application/octet-stream' };
    },
    async transcribe(p) {
      const form = new FormData();
      form.append('file', new Blob([new Uint8Array(p.audio)]), p.filename);
      form.append('model', p.model);
      if (p.language) form.append('language', p.language);
      const res = await fetch(`${base}/audio/transcriptions`, {
        method: 'POST',
        headers: auth,
        body: form,
        signal: signalFor(p.signal),
      }).catch((err) => {
        throw new AudioError(`audio provider unreachable: ${(err as Error).message}`);
      });
      if (!res.ok) throw await fail(res);
      const body = (await res.json().catch(() => undefined)) as { text?: unknown } | undefined;
      if (typeof body?.text !== 'string') throw new AudioError('audio provider answered without text');
      return { text: body.text };
    },
  };
}
