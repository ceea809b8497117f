// Apollo's older websocket client, subscriptions-transport-ws (what Apollo Client 2 and 3's
// WebSocketLink use), at its defaults against the API at argv[2]: it subscribes and prints,
// as one JSON line, what it heard: the subprotocol agreed, the connection error its
// connectionCallback got, the close, and any data (none: the API refuses this protocol).
import WebSocket from 'ws';
import { SubscriptionClient } from 'subscriptions-transport-ws';

const url = process.argv[2].replace(/^http/, 'ws');
const heard = { protocol: null, connectionError: null, close: null, data: [], errors: [] };

const outcome = await new Promise((resolve) => {
  const timer = setTimeout(() => resolve({ ...heard, timedOut: true }), 60_000);
  const client = new SubscriptionClient(
    url,
    { connectionCallback: (error) => { heard.connectionError = error ? error.message : null; } },
    WebSocket,
  );
  const socket = client.client;
  socket.addEventListener('open', () => { heard.protocol = socket.protocol; });
  socket.addEventListener('close', (event) => {
    heard.close = { code: event.code, reason: event.reason };
    clearTimeout(timer);
    setTimeout(() => resolve(heard), 100); // the client's own close handling runs first
  });
  client.request({ query: 'subscription { studentChanged(id: "stu-0001") { __typename } }' })
    .subscribe({
      next: (value) => heard.data.push(value),
      error: (error) => heard.errors.push(String(error && error.message ? error.message : error)),
    });
});
console.log(JSON.stringify(outcome));
process.exit(0);
