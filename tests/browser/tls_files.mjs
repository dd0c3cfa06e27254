// A CA and a server certificate for 127.0.0.1 and localhost, made by the openssl tool in dir, for
// TLS-only masters (RedisCluster.start's tls option: the page's TLS test, checker.mjs --tls).
// EC keys: quick to make.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

// Returns {cert, key, ca}: file paths, valid for two days.
export function makeTlsFiles(dir) {
  const file = (name) => path.join(dir, name);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const run = (args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  run(['req', '-x509', ...ec, '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '2',
    '-subj', '/CN=lockwarden checker CA']);
  run(['req', ...ec, '-keyout', file('server.key'), '-out', file('server.csr'),
    '-subj', '/CN=localhost']);
  fs.writeFileSync(file('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n');
  run(['x509', '-req', '-in', file('server.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'),
    '-CAcreateserial', '-out', file('server.crt'), '-days', '2', '-extfile', file('server.ext')]);
  return { cert: file('server.crt'), key: file('server.key'), ca: file('ca.crt') };
}
