// Preloaded with `node -r` before a real MCP server: corrupts what the server writes on its
// stdout, as LOOPBOUND_GARBAGE says, so that tests see a real server answer garbage.
//   lines        a line that is not JSON, and an empty line, before every message
//   call-text    every tools/call result replaced by a line that is not JSON
//   call-shape   every tools/call result replaced by JSON-RPC whose result is not a tool result
'use strict';
const mode = process.env.LOOPBOUND_GARBAGE || 'lines';
const write = process.stdout.write.bind(process.stdout);

function callResultId(text) {
  try {
    const message = JSON.parse(text);
    if (message && message.id !== undefined && message.result && Array.isArray(message.result.content)) {
      return message.id;
    }
  } catch (_) {}
  return undefined;
}

process.stdout.write = (chunk, ...rest) => {
  const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
  if (mode === 'lines') {
    write('this is not JSON {{{\n\n');
    return write(chunk, ...rest);
  }
  const id = callResultId(text);
  if (id !== undefined && mode === 'call-text') {
    return write('%%% garbage instead of a tool result %%%\n', ...rest);
  }
  if (id !== undefined && mode === 'call-shape') {
    return write(JSON.stringify({ jsonrpc: '2.0', id, result: { content: 'garbage', isError: 'maybe' } }) + '\n', ...rest);
  }
  return write(chunk, ...rest);
};
