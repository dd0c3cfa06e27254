'use strict';
// The client's tests against a live agent at $LOCKWARDEN_SOCKET with real masters, one suite per
// kind, and against a scripted agent for the lines the real one does not send (wire.js):
// `node --test tests/lockwarden.test.js` in a project where the package is installed (test.sh
// makes one). One process runs them all, one at a time: the tests that stop masters or restart
// the agent must not overlap others.

require('./package');
require('./mutex');
require('./resume');
require('./kinds');
require('./election');
require('./signals');
require('./wire');
