// An OTLP/HTTP trace receiver for the trace tests (tests/e2e/test_traces.py)
// that decodes what it is sent with the OpenTelemetry project's own protobuf
// definitions of the protocol (opentelemetry-proto, as compiled into
// @opentelemetry/otlp-transformer), the way a collector does:
//   POST /v1/traces, Content-Type application/json (OTLP/JSON: proto3 JSON
//   with trace and span ids in hex, enums as integers) or
//   application/x-protobuf (binary).
// A request the schema does not take is refused with 400 and a Status, as
// a collector would refuse it: a field the schema does not have (a
// misspelt name is dropped by a lenient decoder, here it is an error), a
// value of the wrong type, an enum written as a name, an id of the wrong
// length. Each accepted request is printed on stdout as one JSON line
// {"ok": REQUEST} (OTLP/JSON as decoded back from the message), each
// refused one as {"refused": WHY}. The first line is {"port": N}.
import { createRequire } from "node:module";
import http from "node:http";

const require = createRequire(import.meta.url);
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root.js");
const Req = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const ID_FIELDS = { traceId: 16, spanId: 8, parentSpanId: 8 };

// OTLP/JSON writes ids in hex where proto3 JSON has base64 (the spec's one
// exception): to base64 for the decoder, checking the length.
function idsToBase64(v, path) {
  if (Array.isArray(v)) return v.map((x, i) => idsToBase64(x, `${path}[${i}]`));
  if (v === null || typeof v !== "object") return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    if (k in ID_FIELDS && typeof x === "string" && x !== "") {
      if (!/^[0-9a-f]*$/.test(x) || x.length !== 2 * ID_FIELDS[k])
        throw new Error(`${path}.${k}: "${x}" is not ${ID_FIELDS[k]} bytes of lowercase hex`);
      out[k] = Buffer.from(x, "hex").toString("base64");
    } else {
      out[k] = idsToBase64(x, `${path}.${k}`);
    }
  }
  return out;
}

function idsToHex(v) {
  if (Array.isArray(v)) return v.map(idsToHex);
  if (v === null || typeof v !== "object") return v;
  const out = {};
  for (const [k, x] of Object.entries(v))
    out[k] = k in ID_FIELDS && typeof x === "string" ? Buffer.from(x, "base64").toString("hex")
                                                     : idsToHex(x);
  return out;
}

const INT64 = /\.(intValue|startTimeUnixNano|endTimeUnixNano|timeUnixNano)$/;

const isDefault = (x) => x === 0 || x === "0" || x === "" || x === false ||
  (Array.isArray(x) && x.length === 0) ||
  (x !== null && typeof x === "object" && !Array.isArray(x) && Object.keys(x).length === 0);

// Every field sent must come back from the decoded message with the same
// value (a default may be left out): what the schema does not know, or
// took as something else, shows here.
function compare(sent, back, path, errs) {
  if (Array.isArray(sent)) {
    if (!Array.isArray(back) || back.length !== sent.length) {
      errs.push(`${path}: an array of ${sent.length} decoded as ${JSON.stringify(back)}`);
      return;
    }
    sent.forEach((x, i) => compare(x, back[i], `${path}[${i}]`, errs));
    return;
  }
  if (sent !== null && typeof sent === "object") {
    if (back === null || typeof back !== "object") {
      if (Object.keys(sent).length) errs.push(`${path}: not a message of the schema`);
      return;
    }
    for (const [k, x] of Object.entries(sent)) {
      if (!(k in back)) {
        if (!isDefault(x)) errs.push(`${path}.${k}: no such field in the OTLP schema`);
        continue;
      }
      compare(x, back[k], `${path}.${k}`, errs);
    }
    return;
  }
  // proto3 JSON may write a 64-bit integer as a number or a string
  if (typeof sent === "number" && typeof back === "string" && INT64.test(path)) {
    if (String(sent) !== back) errs.push(`${path}: ${sent} decoded as ${back}`);
    return;
  }
  if (sent !== back) errs.push(`${path}: ${JSON.stringify(sent)} decoded as ${JSON.stringify(back)}`);
}

const TO_OBJECT = { longs: String, enums: Number, bytes: String, defaults: false, arrays: false };

function decodeJson(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new Error("not JSON: " + e.message);
  }
  for (const [path, enumValue] of enumNames(doc, "$"))
    throw new Error(`${path}: enum written as "${enumValue}"; OTLP/JSON writes enums as integers`);
  const msg = Req.fromObject(idsToBase64(doc, "$"));
  const bad = Req.verify(msg);
  if (bad) throw new Error(bad);
  const back = idsToHex(Req.toObject(Req.decode(Req.encode(msg).finish()), TO_OBJECT));
  const errs = [];
  compare(doc, back, "$", errs);
  if (errs.length) throw new Error(errs.join("; "));
  return back;
}

function* enumNames(v, path) {
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) yield* enumNames(v[i], `${path}[${i}]`);
    return;
  }
  if (v === null || typeof v !== "object") return;
  for (const [k, x] of Object.entries(v)) {
    if ((k === "kind" || k === "code") && typeof x === "string") yield [`${path}.${k}`, x];
    else yield* enumNames(x, `${path}.${k}`);
  }
}

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks);
    const type = (req.headers["content-type"] || "").split(";")[0].trim();
    const answer = (code, obj) => {
      const b = Buffer.from(JSON.stringify(obj));
      res.writeHead(code, { "Content-Type": "application/json", "Content-Length": b.length });
      res.end(b);
    };
    if (req.method !== "POST" || req.url !== "/v1/traces") {
      emit({ refused: `${req.method} ${req.url}: OTLP/HTTP traces go to POST /v1/traces` });
      return answer(404, { code: 5, message: "not found" });
    }
    try {
      let doc;
      if (type === "application/json") doc = decodeJson(body.toString("utf8"));
      else if (type === "application/x-protobuf")
        doc = idsToHex(Req.toObject(Req.decode(body), TO_OBJECT));
      else throw new Error(`Content-Type "${type}": expected application/json or application/x-protobuf`);
      emit({ ok: doc });
      answer(200, {});
    } catch (e) {
      emit({ refused: e.message });
      answer(400, { code: 3, message: e.message });
    }
  });
});

server.listen(0, "127.0.0.1", () => emit({ port: server.address().port }));
process.on("SIGTERM", () => server.close(() => process.exit(0)));
