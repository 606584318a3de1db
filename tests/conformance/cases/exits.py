import os
import signal
import sys

from common import model_and_optimizer, train

model, optimizer = model_and_optimizer()
print(train(model, optimizer, steps=3), flush=True)
how = sys.argv[1]
with open("before_exit.txt", "w") as handle:
    handle.write(how)
if how == "sys_exit_3":
    sys.exit(3)
if how == "sys_exit_message":
    sys.exit("stopping: bad config")
if how == "raise":
    raise ValueError("diverged")
if how == "os_exit":
    os._exit(4)
if how == "sigterm":
    os.kill(os.getpid(), signal.SIGTERM)
if how == "sigint":
    os.kill(os.getpid(), signal.SIGINT)
if how == "own_handler":
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(7))
    os.kill(os.getpid(), signal.SIGTERM)
print("not reached")
