import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "helpers"))
import extra  # noqa: E402
from common import model_and_optimizer, train  # noqa: E402

print(extra.SCALE, sys.path[1] == os.path.dirname(os.path.abspath(__file__)))
model, optimizer = model_and_optimizer()
print(train(model, optimizer, steps=2))
sys.path.remove(sys.path[0])
print(sys.argv)
