// The Vercel AI SDK (`ai` with `@ai-sdk/openai`, chat completions API) with
// experimental_telemetry on, exporting its spans over OTLP/HTTP protobuf to
// OTEL_EXPORTER_OTLP_ENDPOINT (the exporter appends /v1/traces itself). The OpenAI
// provider calls OPENAI_BASE_URL. One plain generateText, then one with a tool the
// model calls (the SDK runs it and sends its result back for the final answer).
import { createOpenAI } from '@ai-sdk/openai';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BatchSpanProcessor, NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { generateText, jsonSchema, stepCountIs, tool } from 'ai';

for (const name of ['OPENAI_BASE_URL', 'OTEL_EXPORTER_OTLP_ENDPOINT']) {
  if (!process.env[name]) {
    console.error(`${name} is not set`);
    process.exit(2);
  }
}

const provider = new NodeTracerProvider({
  resource: resourceFromAttributes({ 'service.name': 'senders-vercel-ai' }),
  spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
});
provider.register();

const openai = createOpenAI({ baseURL: process.env.OPENAI_BASE_URL, apiKey: 'sk-roost-tests' });
const model = openai.chat('gpt-4o-mini');
const telemetry = (functionId) => ({
  isEnabled: true,
  functionId,
  metadata: { sessionId: 'sess-vercel-ai' },
});

const plain = await generateText({
  model,
  system: 'You are a terse assistant.',
  prompt: 'What is the capital of France?',
  maxRetries: 0,
  experimental_telemetry: telemetry('plain-chat'),
});
console.log('plain:', plain.text);

const withTool = await generateText({
  model,
  prompt: 'What is the weather in Paris?',
  tools: {
    get_weather: tool({
      description: 'The weather forecast for a city',
      inputSchema: jsonSchema({
        type: 'object',
        properties: { city: { type: 'string' } },
        required: ['city'],
      }),
      execute: async ({ city }) => ({ city, forecast: 'sunny, 24 C' }),
    }),
  },
  stopWhen: stepCountIs(2),
  maxRetries: 0,
  experimental_telemetry: telemetry('weather-chat'),
});
console.log('after tool:', withTool.text, `(${withTool.steps.length} steps)`);

await provider.forceFlush();
await provider.shutdown();
