/**
 * What this server offers (GET /api/features): read once per page load and shared, so pages
 * leave out what cannot work here (docs/dashboard.md "What the server offers"). Until it is known,
 * or when it cannot be read, nothing optional is offered.
 */
import { useEffect, useState } from 'react';
import { api, call } from './api/client.ts';
import type { paths } from './api/openapi.gen.ts';

export type Features = paths['/api/features']['get']['responses'][200]['content']['application/json'];

let pending: Promise<Features> | undefined;

export function useFeatures(): Features | undefined {
  const [features, setFeatures] = useState<Features>();
  useEffect(() => {
    let live = true;
    pending ??= call(api.GET('/api/features')).catch((err: unknown) => {
      pending = undefined; // the next page asks again
      throw err;
    });
    pending.then(
      (f) => {
        if (live) setFeatures(f);
      },
      () => {},
    );
    return () => {
      live = false;
    };
  }, []);
  return features;
}
