// Package usage reads the token usage an LLM API response reports, as its body streams past, in
// a fixed-size Scanner that allocates nothing, for usage-based charging in the module: the caller
// feeds it every chunk of a response body and reads the figure when the body ends.
//
// A JSON body is one JSON object; only its top-level "usage" counts (an object named usage
// deeper down, or a string holding "usage", does not). An event stream (text/event-stream) is
// read as the HTML Living Standard says: lines end with \n, \r\n or \r; a leading byte order
// mark is skipped; "data:" lines (one space after the colon is dropped) of one event are joined
// by \n; a blank line dispatches the event; comments and other fields are ignored; a last event
// without its blank line is not dispatched. Each event's data is one JSON object, lexed as it
// arrives and never buffered; data that is blank or [DONE] is ignored.
//
// OpenAI (chat completions, and the Responses API): Input is prompt_tokens, Output is
// completion_tokens (the Responses API's input_tokens and output_tokens are the same figures;
// both names of one figure in one usage object is a repetition), Total is total_tokens, or
// Input+Output without it. In a stream (stream_options.include_usage) the last event whose
// top-level usage is an object counts, earlier chunks carrying "usage": null; a Responses API
// event's response.usage counts the same way.
//
// Anthropic (Messages API): Input is input_tokens plus cache_creation_input_tokens and
// cache_read_input_tokens when present (the API counts cached tokens apart from input_tokens),
// Output is output_tokens, Total is Input+Output. In a stream, message_start's message.usage gives
// the input figures, and each message_delta's top-level usage replaces the figures it carries:
// they are cumulative, output_tokens always, the input ones when not null. message_start's
// output_tokens is not charged: a stream without message_delta has no Output. The event's type
// may come after its usage: the figures of each event are kept and committed at its end.
//
// The usage is unreadable (Tokens reports ok false, Reason says why), never a smaller figure,
// when: a figure is negative (also -0), fractional (also 1.0), in exponent form, above MaxTokens,
// a string, a boolean, an array or an object; usage is neither an object nor null; a key that
// counts (usage, a figure, and in a stream Anthropic's type and message, OpenAI's response)
// appears twice in its object; the figure a Count needs is absent or null (a null figure is
// absent); a sum is above MaxTokens; the JSON is malformed, is not an object, or ends inside its
// object (a JSON body, or a dispatched event); there is no usage at all. The figures of every
// dispatched event are checked, also those a later event replaces.
//
// Keys are matched as written: an escaped key ("us\u0061ge") matches nothing, and keys longer
// than the longest key looked for are skipped without being kept. Nesting deeper than 64 levels
// is followed by its depth only (strings and brackets), without checking it is valid JSON there.
package usage
