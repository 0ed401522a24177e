#pragma once
// Ctrl-C (SIGINT) handling for training: the first SIGINT only raises a flag that the training loop polls
// after every step, so a run stops between steps and never in the middle of writing a file; a second SIGINT
// terminates the process at once (checkpoint writes are atomic, so even that leaves no truncated file).
namespace examples {

/// Installs the SIGINT handler (call once, before training).
void install_interrupt_handler();
/// True once SIGINT has been received.
bool interrupt_requested();

}  // namespace examples
