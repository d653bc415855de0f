// The idem benchmark workload through @aws-lambda-powertools/idempotency, for scripts/peers:
// a handler made idempotent with makeIdempotent over the library's Redis persistence layer
// (CachePersistenceLayer with @redis/client), keyed by the request's id.
//
// Payload validation (payloadValidationJmesPath) is off: in 2.35.0 the Redis layer drops the
// validation hash when it completes a record, so every replay of a validated key fails with
// IdempotencyValidationError (aws-powertools/powertools-lambda-typescript#5705, fixed by #5706
// after that release). idem validates the payload on every call of the comparison.
//
//   node powertools.mjs redis://127.0.0.1:6379 [seconds per figure] [concurrency ...]
//
// Prints one JSON line per figure: {"path": "fresh"|"replay", "concurrency": N, "ops_per_s": ...,
// "us_per_op": ..., "cpu_us_per_op": ... (the client's), "commands_per_op": ...}. Concurrency N is N callers awaiting in turn on one
// event loop and one Redis connection, as a Node service would run them.

import { createClient } from '@redis/client';
import { IdempotencyConfig, makeIdempotent } from '@aws-lambda-powertools/idempotency';
import { CachePersistenceLayer } from '@aws-lambda-powertools/idempotency/cache';

const [uri = 'redis://127.0.0.1:6379', secondsArg = '2', ...levels] = process.argv.slice(2);
const seconds = Number(secondsArg);
const concurrency = levels.length > 0 ? levels.map(Number) : [1, 8, 32];

const PAYLOAD = 'card=4242424242424242&amount=1999&currency=EUR';
const RESULT = 'receipt:ch_0000000042:EUR';
const REPLAY_KEYS = 256;
const run = `peers:${process.pid}:`;

const client = await createClient({ url: uri }).connect();
const persistenceStore = new CachePersistenceLayer({ client, keyPrefix: `${run}pt` });
const config = new IdempotencyConfig({
  eventKeyJmesPath: 'id',
  expiresAfterSeconds: 600,
  useLocalCache: false, // every call asks Redis, as idem's RedisStore does
});
// Outside Lambda there is no invocation context; its remaining time is the in-progress lease,
// 30 s as on idem's side.
config.registerLambdaContext({ getRemainingTimeInMillis: () => 30_000 });
// The handler both sides run: it returns the 25-byte receipt.
const charge = makeIdempotent(async (request) => RESULT, { persistenceStore, config });

// Commands the server ran, from INFO commandstats (the whole server: run on a quiet Redis).
async function commandsRun() {
  const info = await client.info('commandstats');
  let total = 0;
  for (const match of info.matchAll(/calls=(\d+)/g)) total += Number(match[1]);
  return total;
}

async function measure(path, callers, nextId) {
  let ops = 0;
  const deadline = performance.now() + seconds * 1000;
  const before = await commandsRun();
  const cpuBefore = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async (_, caller) => {
      while (performance.now() < deadline) {
        const result = await charge({ id: nextId(caller), payload: PAYLOAD });
        if (result !== RESULT) throw new Error(`${path}: unexpected result ${result}`);
        ops += 1;
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const commands = (await commandsRun()) - before - 1; // the INFO itself
  return {
    path,
    concurrency: callers,
    ops,
    ops_per_s: ops / elapsed,
    us_per_op: (elapsed * 1e6) / ops,
    cpu_us_per_op: (cpu.user + cpu.system) / ops,
    commands_per_op: commands / ops,
  };
}

for (let i = 0; i < REPLAY_KEYS; i += 1) await charge({ id: `replay-${i}`, payload: PAYLOAD });

let fresh = 0;
const replayCursor = [];
for (const callers of concurrency) {
  console.log(JSON.stringify(await measure('fresh', callers, () => `fresh-${fresh++}`)));
  console.log(
    JSON.stringify(
      await measure('replay', callers, (caller) => {
        replayCursor[caller] = (replayCursor[caller] ?? caller) + 1;
        return `replay-${replayCursor[caller] % REPLAY_KEYS}`;
      }),
    ),
  );
}

// The records are left to expire (600 s); scripts/peers throws the server away anyway.
await client.quit();
