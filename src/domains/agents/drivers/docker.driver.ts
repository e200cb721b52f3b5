/** Being built (issue in progress): replaced by the Docker driver. */
import type { HostingDriver } from './driver.ts';

export type DockerDriverOptions = { dockerHost: string; image: string };

export function createDockerDriver(_options: DockerDriverOptions): HostingDriver {
  throw new Error('HOSTING_DRIVER=docker is not available yet');
}
