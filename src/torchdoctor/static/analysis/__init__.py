"""What lint rules share: models of a training loop, following calls, values and names.

A rule (``static/rules/<topic>.py``) imports from here, from :mod:`torchdoctor.static.torchapi`
(the table of torch facts) and from ``rules.base``; never from another rule. Modules:

* :mod:`.events`: the one model of a training loop's events (``training.EventKind``) and
  its documented mapping onto the two views below; :func:`~.events.helper_to_follow`, the
  one way of following calls into the file's helpers, with one depth limit.
* :mod:`.step_sequences`: what one iteration does to gradients (backward, step,
  ``zero_grad``, clipping, scheduler), through helpers.
* :mod:`.mode_actions`: ``eval()``/``train()``, forwards and backwards in order, through
  helpers, with parameters mapped to arguments; :mod:`.mode_sensitivity`: whether a model
  behaves differently in eval mode.
* :mod:`.loops`: step loops, periodic guards, names bound in a loop.
* :mod:`.callers`: the function a call runs, and what callers pass for a parameter;
  :mod:`.training_calls`: where a function is called from inside a loop that trains.
* :mod:`.calls`: reading a call's parts (keywords, receiver, last name) and edits that add
  arguments.
* :mod:`.losses` (the loss calls of a file), :mod:`.loss_inputs` (what produced a loss
  input), :mod:`.loss_trail` (where a loss value travels).
* :mod:`.destinations` and :mod:`.sinks`: where a value goes (training or a summary);
  :mod:`.precision`: whether a file needs float64's precision (a tolerance float32 cannot
  meet, a sensitive solver, a gradient check) or a use of it is chosen by an option.
* :mod:`.dataloader`: ``DataLoader`` calls and their arguments; :mod:`.exhaustion`: a
  loader rebuilt only once the last iterator ran out; :mod:`.entries`:
  ``d[key] = value`` writes; :mod:`.ranks`: rank-zero tests.
* :mod:`.cpu_values`: whether a saved value holds only CPU data; :mod:`.weight_saves`:
  whether the program writes its model weights from the CPU.

Nothing here imports torch, and nothing here imports a rule.
"""
